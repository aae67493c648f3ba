package resource

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
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

	acquireScript = redis.NewScript(headroom.Lua() + commonLua + acquireLua)
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
	// DefaultMaxHoldings is the default of RedisOptions.MaxHoldings and
	// Options.MaxHoldings: far more
	// names than a client of the yrmcds protocol holds at once (a lock or
	// a few), few enough that one connection's holdings are a few hundred
	// KiB of Redis.
	DefaultMaxHoldings = 1024
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
	// node of a cluster): a renewal round's pipeline and a drop round's.
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
	// Guard, when not nil, refuses new counters and new holdings of the
	// counters that exist (ErrNoMemory) while it finds Redis full; the
	// holdings that exist keep working, and releases always succeed.
	Guard *headroom.Guard
	// MaxHoldings is the most names one holder (one connection) holds at
	// once; an acquire of one more is refused with ErrNoMemory, changing
	// nothing. Zero means DefaultMaxHoldings.
	MaxHoldings int
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
	// youngEnd is the Unix millisecond until which acquires were found
	// refused for a young store (0: never); youngRefusals counts them.
	youngEnd      atomic.Int64
	youngRefusals atomic.Uint64
	guard         *headroom.Guard // nil: new counters always created
	maxHeld       int             // names one holder may hold (RedisOptions.MaxHoldings)

	holders atomic.Uint64
	created atomic.Uint64

	drops dropper // the holdings of ended holders, until Redis has dropped them

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
	switch {
	case opts.MaxHoldings < 0:
		return nil, fmt.Errorf("resource: max holdings %d: must not be negative", opts.MaxHoldings)
	case opts.MaxHoldings == 0:
		opts.MaxHoldings = DefaultMaxHoldings
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
		maxHeld:  opts.MaxHoldings,
		instance: hex.EncodeToString(id[:]),
		cluster:  isCluster(rdb),

		assumeNoHolders: opts.AssumeNoHolders,
		names:           map[string]map[*RedisHolder]*lease{},
		calls:           make(chan call, maxBatch),
		scans:           make(chan struct{}, maxScans),
		renewRdb:        redisconn.WithPool(rdb, renewPool),
		drops:           newDropper(),
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
			r.youngFor(r.lease - age)
			r.log.Info().Stringer("age", age).Stringer("lease", r.lease).
				Msg("resource store born less than a lease ago (a first start, or Redis lost its data): acquires are refused until a lease after its birth")
		}
	}
	r.wg.Add(3 + batchers)
	// Renewals and drops: with nothing held or ended, nothing is sent.
	go r.renewing()
	go r.every(r.renewEvery(), r.drops.wake, r.dropRound)
	go r.every(r.checkEvery(), nil, r.check)
	for range batchers {
		go r.batch()
	}
	return r, nil
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

// counterKeys returns the two keys of the counter whose hash key is hash:
// the hash and its lease set, with room for the birth key of an acquire.
func counterKeys(hash string) []string {
	return append(make([]string, 0, 3), hash, hash+":l")
}

// keys returns the two keys of a counter name: its hash and its lease set.
func (r *Redis) keys(name []byte) []string {
	return counterKeys(r.prefix + "{" + tag(name) + "}")
}

// acquireKeys returns the keys of an acquire of a counter name: its two
// keys and the birth key of its slot.
func (r *Redis) acquireKeys(name []byte) []string {
	t := tag(name)
	return append(counterKeys(r.prefix+"{"+t+"}"), r.birthKey(t))
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
