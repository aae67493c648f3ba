package resource

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A RedisHolder is what one connection holds in a Redis store. It is not
// safe for concurrent use, except that the store may call its lost
// function from its own goroutine.
type RedisHolder struct {
	r    *Redis
	id   string
	held map[string]uint32
	lost func()
	// gone is set once the holder was told it lost its holdings.
	gone atomic.Bool
}

// NewHolder returns a holder that holds nothing. lost is called (once, from
// any goroutine) when the holder's holdings can no longer be vouched for:
// a lease could not be renewed in time, Redis says a holding expired or no
// longer has it, or a call's outcome is unknown. The holder's owner must
// then end it (the counter port closes the client's connection, which is
// how a client learns its holdings are gone) and call ReleaseAll; every
// later call but a Get fails.
func (r *Redis) NewHolder(lost func()) *RedisHolder {
	return &RedisHolder{
		r:    r,
		id:   r.instance + ":" + strconv.FormatUint(r.holders.Add(1), 10),
		held: map[string]uint32{},
		lost: lost,
	}
}

// errLost is returned by the calls of a holder that lost its holdings.
var errLost = fmt.Errorf("%w: the holder lost its holdings", ErrStore)

// fail tells the holder's owner that its holdings are lost.
func (h *RedisHolder) fail() {
	if h.gone.CompareAndSwap(false, true) && h.lost != nil {
		h.lost()
	}
}

// Acquire adds resources to the named counter, as Holder.Acquire. An error
// wrapping ErrStore means the outcome is unknown, or that Redis no longer
// has a holding this instance believed the holder had; the holder has then
// been failed.
func (h *RedisHolder) Acquire(ctx context.Context, name []byte, resources, maximum uint32) error {
	return h.Do(ctx, []Op{{Kind: OpAcquire, Name: name, Resources: resources, Maximum: maximum}})[0].Err
}

// Release gives back resources of the named counter, as Holder.Release.
// An error wrapping ErrStore means the outcome is unknown, or that Redis
// no longer has a holding this instance believed the holder had (so a
// Release that Redis refuses, though this instance would not have, fails
// the holder too); the holder has then been failed.
func (h *RedisHolder) Release(ctx context.Context, name []byte, resources uint32) error {
	return h.Do(ctx, []Op{{Kind: OpRelease, Name: name, Resources: resources}})[0].Err
}

// forget removes h from the holders of name.
func (r *Redis) forget(name string, h *RedisHolder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hs := r.names[name]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(r.names, name)
		}
	}
}

// Held returns how many resources of the named counter this holder holds,
// as far as this instance knows.
func (h *RedisHolder) Held(name string) uint32 { return h.held[name] }

// ReleaseAll gives back everything the holder holds, in one round trip,
// and leaves it empty; the holder must not be used afterwards. A release
// that fails (Redis stalls, or the call's context ends) is tried again
// with each renewal round until it succeeds (retryDrops), so a closed
// connection's holdings leave Redis soon after, not when the counter is
// next touched.
func (h *RedisHolder) ReleaseAll(ctx context.Context) {
	h.gone.Store(true)
	if len(h.held) == 0 {
		return
	}
	r := h.r
	names := make([]string, 0, len(h.held))
	for name := range h.held {
		names = append(names, name)
		r.forget(name, h)
	}
	h.held = map[string]uint32{}
	failed, err := runEach(ctx, r.rdb, len(names), func(i int) (*redis.Script, []string, []any) {
		return dropScript, r.keys([]byte(names[i])), []any{h.id, r.interval}
	}, func(i int, cmd *redis.Cmd) {
		if cmd.Err() != nil {
			r.pendDrop(drop{names[i], h.id})
		}
	})
	if err != nil {
		r.log.Warn().Err(err).Int("counters", len(names)).Int("not_released", failed).Stringer("lease", r.lease).
			Msg("some resource holdings of a closed connection were not released in Redis; tried again with each renewal round")
	}
}

// A drop is a release of everything holder holds of the counter name,
// still to be done in Redis.
type drop struct{ name, holder string }

// maxPendingDrops bounds the drops kept for a retry; past it, a holding
// whose drop failed leaves Redis when a script touches its counter after
// its lease.
const maxPendingDrops = 100000

// pendDrop keeps d for retryDrops.
func (r *Redis) pendDrop(d drop) {
	r.dropsMu.Lock()
	defer r.dropsMu.Unlock()
	if r.drops == nil {
		r.drops = map[drop]struct{}{}
	}
	if len(r.drops) < maxPendingDrops {
		r.drops[d] = struct{}{}
	}
}

// retryDrops runs the pending drops once, in one pipeline, within
// renewEvery, and keeps those that fail again. drop.lua is harmless to
// repeat.
func (r *Redis) retryDrops() {
	r.dropsMu.Lock()
	pending := make([]drop, 0, len(r.drops))
	for d := range r.drops {
		pending = append(pending, d)
	}
	r.drops = nil
	r.dropsMu.Unlock()
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.renewEvery())
	defer cancel()
	runEach(ctx, r.renewRdb, len(pending), func(i int) (*redis.Script, []string, []any) {
		return dropScript, r.keys([]byte(pending[i].name)), []any{pending[i].holder, r.interval}
	}, func(i int, cmd *redis.Cmd) {
		if cmd.Err() != nil {
			r.pendDrop(pending[i])
		}
	})
}
