package resource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// An OpKind is the kind of one operation of RedisHolder.Do.
type OpKind uint8

// The operations RedisHolder.Do runs.
const (
	OpAcquire OpKind = iota + 1
	OpRelease
	OpGet
)

// An Op is one operation of RedisHolder.Do: an Acquire (Resources,
// Maximum), a Release (Resources) or a Get of the counter Name.
type Op struct {
	Kind               OpKind
	Name               []byte
	Resources, Maximum uint32
}

// A Result is the outcome of one Op: Value is the consumption a Get read.
type Result struct {
	Value uint32
	Err   error
}

// Do runs ops in order, as calls of Acquire, Release and Get one after
// another would, but in one round trip to Redis: the scripts go in one
// pipeline, which Redis runs in order (in a cluster, in order per node,
// and the operations of one name share a node). Errors are those of the
// single calls: an Acquire or Release that answers an error wrapping
// ErrStore has failed the holder (see Acquire and Release), and those of
// a failed holder answer one without running. A Get does not depend on
// the holder: it runs even once the holder was failed, as Redis.Get does.
func (h *RedisHolder) Do(ctx context.Context, ops []Op) []Result {
	r := h.r
	res := make([]Result, len(ops))
	type sent struct {
		i      int
		script *redis.Script
		keys   []string
		args   []any
	}
	var batch []sent
	holding := len(h.held) // names held, and those this batch may add
	adding := map[string]bool{}
	for i, op := range ops {
		switch {
		case !validName(op.Name),
			op.Kind == OpAcquire && (op.Resources == 0 || op.Maximum < op.Resources):
			res[i].Err = ErrInvalid
		case op.Kind == OpGet:
			batch = append(batch, sent{i, peekScript, r.keys(op.Name), []any{r.interval}})
		case h.gone.Load():
			res[i].Err = errLost
		case op.Kind == OpAcquire && h.held[string(op.Name)] == 0 && !adding[string(op.Name)] && holding >= r.maxHeld:
			res[i].Err = tooManyHoldings(r.maxHeld)
		case op.Kind == OpAcquire:
			if h.held[string(op.Name)] == 0 && !adding[string(op.Name)] {
				adding[string(op.Name)] = true
				holding++
			}
			batch = append(batch, sent{i, acquireScript, r.acquireKeys(op.Name),
				[]any{h.id, op.Resources, op.Maximum, r.interval, r.lease.Milliseconds(), op.Name, r.backdate(), r.guard.Check(int64(len(op.Name))*2 + 256)}})
		case op.Kind == OpRelease:
			batch = append(batch, sent{i, releaseScript, r.keys(op.Name), []any{h.id, op.Resources, r.interval}})
		default:
			res[i].Err = fmt.Errorf("%w: operation %d", ErrInvalid, op.Kind)
		}
	}
	if len(batch) == 0 {
		return res
	}
	// Mark the releases of leases renewals may be looking at.
	var releasing []*lease
	r.mu.Lock()
	for _, s := range batch {
		if op := ops[s.i]; op.Kind == OpRelease {
			if l := r.names[string(op.Name)][h]; l != nil {
				l.releasing++
				releasing = append(releasing, l)
			}
		}
	}
	r.mu.Unlock()

	t0 := time.Now()
	cmds := make([]*redis.Cmd, len(batch))
	if len(batch) == 1 {
		s := batch[0]
		cmds[0] = r.run(ctx, s.script, s.keys, s.args...)
	} else {
		redisconn.RunEach(ctx, r.rdb, len(batch), func(k int) (*redis.Script, []string, []any) {
			return batch[k].script, batch[k].keys, batch[k].args
		}, func(k int, cmd *redis.Cmd) { cmds[k] = cmd })
	}

	// Apply the results in order, under one lock, so that no renewal sees
	// a holding between two of them.
	failed, gone := false, false
	r.mu.Lock()
	for k, s := range batch {
		op := ops[s.i]
		var err error
		switch op.Kind {
		case OpAcquire:
			err = h.acquired(op, cmds[k], r.validUntil(t0))
		case OpRelease:
			err = h.released(op, cmds[k])
		case OpGet:
			var e Entry
			e, err = parsePeek(cmds[k])
			res[s.i].Value = e.Consumption
		}
		if err == errGone {
			gone = true
		}
		if err != nil && op.Kind != OpGet && !isAnswer(err) {
			failed = true
		}
		res[s.i].Err = err
	}
	for _, l := range releasing {
		l.releasing--
	}
	r.mu.Unlock()
	if gone && !h.gone.Load() {
		r.log.Warn().Str("holder", h.id).Msg("resource holding gone from Redis: closing its connection")
	}
	if failed {
		h.fail()
	}
	return res
}

// errGone is the error of an acquire or release that found in Redis that
// a holding this instance believes the holder has is gone (its lease
// ended, and maybe others took its resources since). The holder has then
// been failed: the local and the Redis view of it no longer agree, and
// what it holds can no longer be vouched for.
var errGone = fmt.Errorf("%w: the holding is gone from Redis", ErrStore)

// isAnswer reports whether err is a definite answer of a script, not an
// unknown outcome.
func isAnswer(err error) bool {
	return err == ErrNotAvailable || err == ErrNotFound || err == ErrNotAcquired || errors.Is(err, ErrNoMemory)
}

// acquired applies the reply of an acquire script. The caller holds r.mu.
func (h *RedisHolder) acquired(op Op, cmd *redis.Cmd, until time.Time) error {
	r := h.r
	v, err := cmd.Int64Slice()
	if err != nil || len(v) != 3 && !(len(v) == 4 && v[0] == -2) {
		h.noteUnsure(string(op.Name))
		return fmt.Errorf("%w: acquire: %v (reply %v)", ErrStore, err, v)
	}
	if v[1] == 1 {
		r.created.Add(1)
	}
	key := string(op.Name)
	if v[0] == -1 || v[2] < int64(h.held[key]) {
		// The holding expired, or Redis holds less for the holder than
		// it acquired: a script of another instance dropped the expired
		// holding first (or the keys vanished). What this acquire added,
		// if anything, is dropped with the rest by ReleaseAll.
		return errGone
	}
	switch v[0] {
	case 1:
	case 0:
		return ErrNotAvailable
	case -2:
		r.refusedYoung(time.Duration(v[3]) * time.Millisecond)
		return ErrNotAvailable
	case -3:
		return r.guard.Refused(ErrNoMemory)
	default:
		h.noteUnsure(key)
		return fmt.Errorf("%w: acquire: reply %v", ErrStore, v)
	}
	h.held[key] += op.Resources
	hs := r.names[key]
	if hs == nil {
		hs = map[*RedisHolder]*lease{}
		r.names[key] = hs
	}
	l := hs[h]
	if l == nil {
		l = &lease{}
		hs[h] = l
	}
	if until.After(l.until) {
		l.until = until
	}
	return nil
}

// noteUnsure notes that an acquire of the counter name has an unknown
// outcome: the holder is failed, and ReleaseAll drops the counter too.
func (h *RedisHolder) noteUnsure(name string) {
	if h.unsure == nil {
		h.unsure = map[string]struct{}{}
	}
	h.unsure[name] = struct{}{}
}

// released applies the reply of a release script. The caller holds r.mu.
func (h *RedisHolder) released(op Op, cmd *redis.Cmd) error {
	v, err := cmd.Int64()
	if err != nil {
		return fmt.Errorf("%w: release: %v", ErrStore, err)
	}
	key := string(op.Name)
	held := h.held[key]
	switch v {
	case 1:
	case -1:
		if held > 0 {
			// The counter is gone with the holding.
			return errGone
		}
		return ErrNotFound
	case -2:
		if held > 0 && held >= op.Resources {
			// Redis holds less for the holder than this instance
			// believes: the holding expired and a script of another
			// instance dropped it (else this one would have: -3).
			return errGone
		}
		return ErrNotAcquired
	case -3:
		return errGone
	default:
		return fmt.Errorf("%w: release: reply %d", ErrStore, v)
	}
	if held > op.Resources {
		h.held[key] = held - op.Resources
		return nil
	}
	delete(h.held, key)
	if hs := h.r.names[key]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(h.r.names, key)
		}
	}
	return nil
}

// refusedYoung counts an acquire refused because the store's data in its
// slot is younger than one lease, for left more, and logs it at most once
// a lease.
func (r *Redis) refusedYoung(left time.Duration) {
	r.youngRefusals.Add(1)
	r.youngFor(left)
	now := time.Now()
	until := r.youngUntil.Load()
	if now.UnixMilli() < until || !r.youngUntil.CompareAndSwap(until, now.Add(r.lease).UnixMilli()) {
		return
	}
	r.log.Warn().Stringer("lease", r.lease).Time("until", r.refusedUntil()).
		Msg("resource acquires refused: " + YoungReason)
}

// YoungReason says why acquires are refused until RefusedUntil.
const YoungReason = "the store's data in Redis is younger than one lease (a first start, or Redis lost its data: a restart without persistence, a failover, a flush)"

// youngFor records that acquires are refused for left more (in some
// slot), keeping the latest such time.
func (r *Redis) youngFor(left time.Duration) {
	at := time.Now().Add(left).UnixMilli()
	for {
		old := r.youngEnd.Load()
		if at <= old || r.youngEnd.CompareAndSwap(old, at) {
			return
		}
	}
}

// refusedUntil is the latest time until which acquires were found refused.
func (r *Redis) refusedUntil() time.Time { return time.UnixMilli(r.youngEnd.Load()) }

// RefusedUntil returns until when acquires are refused because the
// store's data is younger than one lease (YoungReason), as the last
// refusal (or the start) found it, and whether that time is still to
// come. In a cluster it is the latest of the slots found young.
func (r *Redis) RefusedUntil() (time.Time, bool) {
	until := r.refusedUntil()
	return until, r.youngEnd.Load() != 0 && time.Now().Before(until)
}

// YoungRefusals is the number of acquires refused because the store's
// data was younger than one lease.
func (r *Redis) YoungRefusals() uint64 { return r.youngRefusals.Load() }
