package resource

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed drop.lua
	dropLua string
	//go:embed renew.lua
	renewLua string
	//go:embed peek.lua
	peekLua string

	acquireScript = redis.NewScript(commonLua + acquireLua)
	releaseScript = redis.NewScript(commonLua + releaseLua)
	dropScript    = redis.NewScript(commonLua + dropLua)
	renewScript   = redis.NewScript(commonLua + renewLua)
	peekScript    = redis.NewScript(commonLua + peekLua)

	scripts = []*redis.Script{acquireScript, releaseScript, dropScript, renewScript, peekScript, birthScript}
)

// Defaults and limits of RedisOptions.
const (
	// DefaultLease is the default RedisOptions.Lease.
	DefaultLease = 10 * time.Second
	// MinLease is the shortest lease allowed.
	MinLease = 100 * time.Millisecond
	// scanCount is the COUNT of the SCAN of Dump and Stats: about how
	// many keys of the database, whoever's, one round trip walks (there
	// is no index of the counters: see scan).
	scanCount = 1000
	// peekPage is the most counters Dump and Stats read in one round trip
	// (one script each).
	peekPage = 100
	// maxScans is how many Dumps and Stats of one instance run at once;
	// the others wait for their turn, within their context. It bounds the
	// work in Redis that a flood of them queues ahead of other requests,
	// and the memory of their sets of keys seen (see scan).
	maxScans = 4
	// renewPool is the size of the pool of the renewals' own client (per
	// node of a cluster): one pipeline a round, and a spare.
	renewPool = 2
)

// ErrClosed is the error of a call on a closed store.
var ErrClosed = errors.New("resource: store closed")

// ErrStore wraps the errors of Redis calls whose outcome is unknown: the
// server was unreachable, slow or broken. A holder that got it has been
// told it lost its holdings (see Redis.NewHolder).
var ErrStore = errors.New("resource: store failed")

// RedisOptions configure a Redis store. Zero fields mean the documented
// defaults.
type RedisOptions struct {
	// Prefix is the service's base prefix (e.g. "vkc:"): every key starts
	// with it followed by "r:".
	Prefix string
	// Interval is the statistics interval, as Options.Interval.
	Interval time.Duration
	// Lease is how long a holding outlives its instance: an instance renews
	// its holders' leases every Lease/4, and when it has not managed to for
	// 3/4 of a lease it gives the holders up (see NewHolder) before Redis
	// lets others take their resources. Default DefaultLease, at least
	// MinLease.
	Lease time.Duration
	// Logger receives renewal failures and lost leases.
	Logger zerolog.Logger
	// AssumeNoHolders lets a store whose data was just born (see
	// birth.lua) grant at once instead of one lease later. Only for a
	// prefix under which no instance can hold anything, such as a test's
	// own: on a prefix in use it gives up the guarantee when Redis loses
	// its data. The service never sets it.
	AssumeNoHolders bool
	// Guard, when not nil, refuses new counters (ErrNoMemory) while it
	// finds Redis full; existing counters keep working.
	Guard *headroom.Guard
}

// Redis keeps the resource counters in Redis, so that every instance using
// the same Redis (single server or cluster) and prefix enforces one maximum
// per name. It has the semantics of Table and Holder: holdings per holder
// (one per client connection), released when the holder ends, maximum
// consumption per epoch-aligned interval, and counters garbage-collected at
// the boundary after they fall idle at 0 (by key expiry, with no sweeper).
// The clock is Redis's TIME, for intervals and leases alike.
//
// Each name is two keys with one hash tag (so one cluster slot), updated by
// one Lua script per call. The holdings of this instance live under leases
// that a goroutine renews; Close stops it.
//
// The client must not retry commands (MaxRetries -1, and for a cluster
// MaxRedirects -1): a retried acquire would be a second acquire. NewRedis
// refuses one that does. It is safe for concurrent use.
type Redis struct {
	rdb redis.UniversalClient
	// renewRdb is a client of the same Redis with connections of its own,
	// for the renewals: they never wait for a connection behind client
	// requests. Closed by Close.
	renewRdb redis.UniversalClient
	prefix   string
	interval int64 // seconds
	lease    time.Duration
	log      zerolog.Logger
	instance string // random, names this instance's holders
	cluster  bool   // a birth key per slot (see birth.go)

	assumeNoHolders bool
	// youngUntil is the Unix millisecond until which refusals for a young
	// store are not logged again.
	youngUntil atomic.Int64
	guard      *headroom.Guard // nil: new counters always created

	holders atomic.Uint64
	created atomic.Uint64

	mu sync.Mutex
	// names is guarded by mu. It maps a held counter to the holders of
	// this instance holding it, each with its lease.
	names map[string]map[*RedisHolder]*lease

	calls chan call     // scripts waiting for a batcher
	scans chan struct{} // a token per Dump or Stats running (maxScans)

	stop     chan struct{}
	stopOnce sync.Once      // closes stop
	wg       sync.WaitGroup // the lease loops and the batchers
}

// A lease is one holder's lease on one counter, from the acquire that
// made the holding until the release or drop that ends it: a new holding
// of the same counter is a new lease, so a renewal that raced with the
// end of an old one cannot touch the new one.
type lease struct {
	// until is the local time before which the lease is known to hold
	// in Redis, and releasing counts the releases of it on their way to
	// Redis: a renewal that finds the holding gone meanwhile may have
	// raced with one of them, and proves nothing (one that finds it there
	// extends until all the same). Guarded by Redis.mu.
	until     time.Time
	releasing int
}

// keyPart follows the base prefix in every key of the store.
const keyPart = "r:"

// NewRedis returns a store on rdb and starts its lease loop, or an error if
// opts is invalid or rdb retries commands. It loads the scripts.
func NewRedis(ctx context.Context, rdb redis.UniversalClient, opts RedisOptions) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("resource: nil Redis client")
	}
	if err := checkNoRetries(rdb); err != nil {
		return nil, err
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Interval < MinInterval || opts.Interval%time.Second != 0 {
		return nil, fmt.Errorf("resource: interval %v: must be whole seconds, at least %v", opts.Interval, MinInterval)
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if opts.Lease < MinLease {
		return nil, fmt.Errorf("resource: lease %v: must be at least %v", opts.Lease, MinLease)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	r := &Redis{
		rdb:      rdb,
		prefix:   opts.Prefix + keyPart,
		interval: int64(opts.Interval / time.Second),
		lease:    opts.Lease,
		log:      opts.Logger,
		guard:    opts.Guard,
		instance: hex.EncodeToString(id[:]),
		cluster:  isCluster(rdb),

		assumeNoHolders: opts.AssumeNoHolders,
		names:           map[string]map[*RedisHolder]*lease{},
		calls:           make(chan call, maxBatch),
		scans:           make(chan struct{}, maxScans),
		renewRdb:        renewClient(rdb),
		stop:            make(chan struct{}),
	}
	for _, s := range scripts {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			r.renewRdb.Close()
			return nil, fmt.Errorf("resource: load scripts: %w", err)
		}
	}
	if !r.assumeNoHolders {
		age, err := r.bear(ctx)
		switch {
		case err != nil:
			r.log.Warn().Err(err).Msg("resource store: births not all written; the first acquire of each slot writes its own")
		case age < r.lease:
			r.log.Info().Stringer("age", age).Stringer("lease", r.lease).
				Msg("resource store born less than a lease ago (a first start, or Redis lost its data): acquires are refused until a lease after its birth")
		}
	}
	r.wg.Add(2 + batchers)
	// Renewals: with nothing held, nothing is sent.
	go r.every(r.renewEvery(), r.renew)
	go r.every(r.checkEvery(), r.check)
	for range batchers {
		go r.batch()
	}
	return r, nil
}

// renewClient returns a client with rdb's options (which checkNoRetries
// has checked) and a pool of renewPool connections.
func renewClient(rdb redis.UniversalClient) redis.UniversalClient {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		o := *c.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = renewPool, 0, renewPool
		o.PushNotificationProcessor = nil // as below
		return redis.NewClusterClient(&o)
	}
	o := *rdb.(*redis.Client).Options()
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns = renewPool, 0, renewPool
	// The push processor NewClient made for rdb is rdb's own: a second
	// client registering its handlers on it fails.
	o.PushNotificationProcessor = nil
	return redis.NewClient(&o)
}

// isCluster reports whether rdb is a cluster client.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// checkNoRetries refuses a client that would resend a command on its own.
// go-redis turns a configured -1 into 0 (no retry) and a configured 0
// into its default, 3.
func checkNoRetries(rdb redis.UniversalClient) error {
	switch c := rdb.(type) {
	case *redis.Client:
		if c.Options().MaxRetries > 0 {
			return fmt.Errorf("resource: the Redis client retries commands (MaxRetries %d): set -1", c.Options().MaxRetries)
		}
	case *redis.ClusterClient:
		o := c.Options()
		if o.MaxRetries > 0 || o.MaxRedirects > 0 {
			return fmt.Errorf("resource: the Redis cluster client retries commands (MaxRetries %d, MaxRedirects %d): set both -1", o.MaxRetries, o.MaxRedirects)
		}
	default:
		return fmt.Errorf("resource: Redis client %T: want *redis.Client or *redis.ClusterClient", rdb)
	}
	return nil
}

// Lease returns the lease.
func (r *Redis) Lease() time.Duration { return r.lease }

// Interval returns the statistics interval.
func (r *Redis) Interval() time.Duration { return time.Duration(r.interval) * time.Second }

// tag returns the hash tag of a counter name's keys.
func tag(name []byte) string {
	sum := sha256.Sum256(name)
	return hex.EncodeToString(sum[:16])
}

// keys returns the two keys of a counter name: its hash and its lease set.
func (r *Redis) keys(name []byte) []string {
	k := r.prefix + "{" + tag(name) + "}"
	return []string{k, k + ":l"}
}

// acquireKeys returns the keys of an acquire of a counter name: its two
// keys and the birth key of its slot.
func (r *Redis) acquireKeys(name []byte) []string {
	t := tag(name)
	k := r.prefix + "{" + t + "}"
	return []string{k, k + ":l", r.birthKey(t)}
}

// Close stops the lease loop. It does not release the holdings of open
// holders: end them first (their leases then expire on their own).
// Calling it more than once, even at once, is harmless.
func (r *Redis) Close() error {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
		r.renewRdb.Close()
	})
	return nil
}

// renewEvery is how often leases are renewed, and the time limit of one
// renewal round.
func (r *Redis) renewEvery() time.Duration { return r.lease / 4 }

// margin is how long before its lease ends in Redis a holding is given up
// locally: a renewal may take renewEvery, the check runs every checkEvery,
// and the rest covers the clock rates of this host and Redis differing.
func (r *Redis) margin() time.Duration { return r.lease / 4 }

// checkEvery is how often holdings past their local deadline are given up.
func (r *Redis) checkEvery() time.Duration { return r.lease / 20 }

// validUntil is the local deadline of a lease renewed by a call sent at t0:
// Redis set it to expire lease after it ran the call, so at least lease
// after t0; give it up margin earlier.
func (r *Redis) validUntil(t0 time.Time) time.Time { return t0.Add(r.lease - r.margin()) }

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
// and leaves it empty; the holder must not be used afterwards. Holdings
// whose release fails stay in Redis until their lease, no longer renewed,
// ends.
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
	}, nil)
	if err != nil {
		r.log.Warn().Err(err).Int("counters", len(names)).Int("not_released", failed).Stringer("lease", r.lease).
			Msg("some resource holdings of a closed connection were not released in Redis; they expire with their lease")
	}
}

// runEach runs n scripts in one pipeline, the i-th being the script, keys
// and arguments args(i) gives, and passes each reply (or its error) to
// reply. A script missing from the server's script cache did not run; it
// is run again with EVAL, which loads it. It returns the first error of
// the final replies (after those runs again; a nil reply, redis.Nil, is
// not an error) and how many replies failed.
func runEach(ctx context.Context, rdb redis.UniversalClient, n int,
	args func(i int) (*redis.Script, []string, []any), reply func(i int, cmd *redis.Cmd)) (failed int, err error) {
	cmds := make([]*redis.Cmd, n)
	rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			script, keys, a := args(i)
			cmds[i] = script.EvalSha(ctx, p, keys, a...)
		}
		return nil
	})
	for i, cmd := range cmds {
		if cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			// A SCRIPT FLUSH, or a failover to a server that never
			// saw the scripts.
			script, keys, a := args(i)
			cmd = script.Eval(ctx, rdb, keys, a...)
		}
		if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
			failed++
			if err == nil {
				err = e
			}
		}
		if reply != nil {
			reply(i, cmd)
		}
	}
	return failed, err
}

// every calls fn every d until Close.
func (r *Redis) every(d time.Duration, fn func()) {
	defer r.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		fn()
	}
}

// renew renews every lease of this instance once.
func (r *Redis) renew() {
	type held struct {
		name    string
		holders []*RedisHolder
		leases  []*lease
	}
	r.mu.Lock()
	round := make([]held, 0, len(r.names))
	for name, hs := range r.names {
		e := held{name: name}
		for h, l := range hs {
			e.holders = append(e.holders, h)
			e.leases = append(e.leases, l)
		}
		round = append(round, e)
	}
	r.mu.Unlock()
	if len(round) == 0 {
		return
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.renewEvery())
	defer cancel()
	lost := map[*RedisHolder]bool{}
	failed, err := runEach(ctx, r.renewRdb, len(round), func(i int) (*redis.Script, []string, []any) {
		a := []any{r.lease.Milliseconds(), r.interval}
		for _, h := range round[i].holders {
			a = append(a, h.id)
		}
		return renewScript, r.keys([]byte(round[i].name)), a
	}, func(i int, cmd *redis.Cmd) {
		gone, err := cmd.StringSlice()
		if err != nil {
			return // not renewed: the check gives it up in time
		}
		isGone := map[string]bool{}
		for _, id := range gone {
			isGone[id] = true
		}
		until := r.validUntil(t0)
		e := round[i]
		r.mu.Lock()
		defer r.mu.Unlock()
		hs := r.names[e.name]
		for k, h := range e.holders {
			l := e.leases[k]
			switch {
			case hs[h] != l:
				// The holding ended (and maybe began again) meanwhile:
				// this renewal says nothing about the lease it has now.
			case !isGone[h.id]:
				// Redis had the holding and moved its deadline to at
				// least lease after it ran the renewal, so after t0.
				// That holds even with releases of it on their way: a
				// partial release (or a Release 0) keeps the holding's
				// deadline, and a full release ends the lease, which
				// then is no longer hs[h]. (Ignoring the renewal here
				// would give up a connection that always has a release
				// in flight, such as one touching its holding with
				// Release 0 back to back.)
				if until.After(l.until) {
					l.until = until
				}
			case l.releasing == 0:
				lost[h] = true
			default:
				// Gone, but a release of it is on its way: the renewal
				// may have run after that release ended the holding, so
				// it proves nothing. Were the holding lost, the release
				// finds out (release.lua answers -3, or -2 for a
				// holding this instance believes it has).
			}
		}
	})
	if err != nil {
		r.log.Warn().Err(err).Int("counters", len(round)).Int("not_renewed", failed).Msg("resource leases not renewed")
	}
	for h := range lost {
		r.log.Warn().Str("holder", h.id).Msg("resource holding expired in Redis: closing its connection")
		h.fail()
	}
}

// check gives up the holders whose lease may end before it is renewed.
func (r *Redis) check() {
	now := time.Now()
	var late []*RedisHolder
	r.mu.Lock()
	for _, hs := range r.names {
		for h, l := range hs {
			if now.After(l.until) {
				late = append(late, h)
			}
		}
	}
	r.mu.Unlock()
	for _, h := range late {
		if !h.gone.Load() {
			r.log.Error().Str("holder", h.id).Stringer("lease", r.lease).
				Msg("resource lease not renewed in time: closing the connection that holds it")
		}
		h.fail()
	}
}

// Get returns the named counter's consumption, or ErrNotFound. Errors
// other than those wrap ErrStore.
func (r *Redis) Get(ctx context.Context, name []byte) (uint32, error) {
	if !validName(name) {
		return 0, ErrInvalid
	}
	e, err := parsePeek(r.run(ctx, peekScript, r.keys(name), r.interval))
	if err != nil {
		return 0, err
	}
	return e.Consumption, nil
}

// parsePeek decodes a peek reply. A name that is not a valid counter name
// (the keys were written by something else) is an error wrapping
// errBadName.
func parsePeek(cmd *redis.Cmd) (Entry, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrStore, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return Entry{}, fmt.Errorf("%w: peek reply %v", ErrStore, v)
	}
	name, ok1 := a[0].(string)
	c, ok2 := a[1].(int64)
	m, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 || c < 0 || m < 0 || c > 1<<32-1 || m > 1<<32-1 {
		return Entry{}, fmt.Errorf("%w: peek reply %v", ErrStore, v)
	}
	if !validName([]byte(name)) {
		return Entry{}, fmt.Errorf("%w: name of %d bytes", errBadName, len(name))
	}
	return Entry{Name: name, Consumption: uint32(c), MaxConsumption: uint32(m)}, nil
}

// errBadName is the error of a peek reply whose name is not a valid
// counter name: every acquire checks the name, so the counter's hash was
// written by something else.
var errBadName = fmt.Errorf("%w: invalid counter name in Redis", ErrStore)

// Dump calls fn for every counter in Redis under the prefix (of every
// instance), as Table.Dump, each once. It scans every master of a
// cluster, and the whole database: see scan for the cost. Its work in
// Redis is paged (a SCAN of scanCount keys, then a pipeline of at most
// peekPage scripts, each a round trip), and at most maxScans Dumps and
// Stats of this instance run at once: the others wait for their turn, so
// a flood of them cannot queue in Redis ahead of the renewals of leases
// (which also have connections of their own). A Dump that has not had its
// turn when ctx ends fails with ErrStore. A counter whose hash holds an
// invalid name (written by something else) is skipped, and logged.
func (r *Redis) Dump(ctx context.Context, fn func(Entry) error) error {
	select {
	case r.scans <- struct{}{}:
		defer func() { <-r.scans }()
	case <-ctx.Done():
		return fmt.Errorf("%w: dump: waiting for the %d dumps running: %v", ErrStore, maxScans, ctx.Err())
	case <-r.stop:
		return ErrClosed
	}
	return r.scan(ctx, func(keys []string) error {
		for len(keys) > 0 {
			page := keys[:min(len(keys), peekPage)]
			keys = keys[len(page):]
			if err := r.peekPage(ctx, page, fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// peekPage reads the counters of keys, their hash keys, in one round
// trip, and calls fn for each that exists.
func (r *Redis) peekPage(ctx context.Context, keys []string, fn func(Entry) error) error {
	var es []Entry
	var perr error
	_, err := runEach(ctx, r.rdb, len(keys), func(i int) (*redis.Script, []string, []any) {
		return peekScript, []string{keys[i], keys[i] + ":l"}, []any{r.interval}
	}, func(i int, cmd *redis.Cmd) {
		e, err := parsePeek(cmd)
		switch {
		case err == nil:
			es = append(es, e)
		case errors.Is(err, errBadName):
			r.log.Warn().Err(err).Str("key", keys[i]).Msg("resource counter with an invalid name in Redis: not listed")
		case !errors.Is(err, ErrNotFound) && perr == nil:
			perr = err
		}
	})
	if err != nil {
		return fmt.Errorf("%w: dump: %v", ErrStore, err)
	}
	if perr != nil {
		return perr
	}
	for _, e := range es {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// scan calls fn with batches of counter hash keys under the prefix,
// scanning every master of a cluster (fn is called one batch at a time),
// each key once.
//
// SCAN walks every key of the database, not only the counters' (MATCH
// filters what it returns, not what it reads): the cost grows with the
// whole database, scanCount keys per round trip. No index of the counters
// is kept because it could not stay in step with them: each counter is
// one cluster slot, changed by one script on that slot only, and an index
// key would be another slot, which a script cannot write atomically with
// the counter (nor would it expire with it). SCAN may return a key twice
// (while the database is rehashed, or a slot moves between masters);
// scan passes on each once, remembering the keys seen (16 bytes each).
func (r *Redis) scan(ctx context.Context, fn func(keys []string) error) error {
	// Exactly the counters' hash keys: prefix{32 hex digits}.
	match := escapeGlob(r.prefix) + "{" + strings.Repeat("[0-9a-f]", 32) + "}"
	var mu sync.Mutex // ForEachMaster scans the masters at once
	seen := map[[16]byte]struct{}{}
	fresh := func(keys []string) error {
		mu.Lock()
		defer mu.Unlock()
		out := keys[:0]
		for _, k := range keys {
			var id [16]byte
			tag, ok := strings.CutPrefix(k, r.prefix+"{")
			tag, ok2 := strings.CutSuffix(tag, "}")
			if !ok || !ok2 || len(tag) != 2*len(id) {
				continue // another prefix's key (see escapeGlob)
			}
			if _, err := hex.Decode(id[:], []byte(tag)); err != nil {
				continue // not hex: not a counter's key
			}
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
			out = append(out, k)
		}
		if len(out) == 0 {
			return nil
		}
		return fn(out)
	}
	one := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				return fmt.Errorf("%w: scan: %v", ErrStore, err)
			}
			if len(keys) > 0 {
				if err := fresh(keys); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	cc, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return one(ctx, r.rdb)
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return one(ctx, c)
	})
}

// escapeGlob returns a SCAN pattern that matches s: its pattern
// characters escaped, and each byte that is not part of valid UTF-8 (a
// prefix need not be UTF-8) replaced by ?, which matches any one byte.
// Such a pattern can match keys of other prefixes, which the caller must
// filter out; it is not sent as is because miniredis, the embedded Redis,
// compiles patterns to Go regular expressions and panics on one that is
// not UTF-8 (and ? matches an invalid byte there too).
func escapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n == 1:
			b.WriteByte('?')
		case strings.ContainsRune(`*?[]\`, c):
			b.WriteByte('\\')
			b.WriteByte(s[i])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Stats returns the store's statistics: Objects counts the counters in
// Redis (a scan), TotalObjects those this instance created, UsedMemory
// estimates the counters' memory as Table does (names plus a fixed
// overhead). Redis has no lock waits and no GC runs: the other fields are
// 0.
func (r *Redis) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := r.Dump(ctx, func(e Entry) error {
		s.Objects++
		s.UsedMemory += cost(len(e.Name))
		return nil
	})
	s.TotalObjects = r.created.Load()
	return s, err
}
