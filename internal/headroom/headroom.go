// Package headroom keeps the counter stores from filling a Redis that
// they share with the bot: a Guard reads the server's used_memory and
// maxmemory (INFO memory) now and then, and once used_memory passes
// maxmemory less the headroom kept for the bot, the stores create no new
// counter names (existing names keep counting) until it falls back.
//
// The reading is cheap by construction: a Guard reads INFO at most once
// per Options.Every (once per Every/10 while used_memory is past half the
// limit, where a fast client could pass the limit between two readings),
// only when a store asks (so an idle service sends no command), and in the
// background (no request waits for it). New names created between two
// readings are not held back, so the headroom must hold what counter
// clients can write in Every/10. A Redis without
// maxmemory gives the Guard nothing to compare with: it then refuses
// nothing.
package headroom

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultEvery is Options.Every when it is zero.
const DefaultEvery = time.Second

// Options configure a Guard.
type Options struct {
	// Percent of maxmemory kept for the bot, 1 to 99: new names are
	// refused once used_memory passes maxmemory * (100 - Percent) / 100.
	Percent int
	// Every is the least time between two readings (default DefaultEvery).
	Every time.Duration
	// Timeout bounds one reading (default Every).
	Timeout time.Duration
	// Setting names the setting of Percent in refusals, e.g.
	// "COUNTERS_REDIS_HEADROOM".
	Setting string
}

// A Guard tells the counter stores whether they may create new names.
// A nil *Guard refuses nothing. It is safe for concurrent use.
type Guard struct {
	rdb  redis.UniversalClient
	opts Options
	now  func() time.Time

	reading atomic.Bool  // a reading is under way
	next    atomic.Int64 // Unix nanoseconds before which no reading starts
	state   atomic.Pointer[Reading]
	refused atomic.Uint64
	readErr atomic.Uint64
	mu      sync.Mutex // serializes readings (the background one and Read)
}

// New returns a Guard on rdb, or an error if opts is invalid. It sends
// nothing until a store asks.
func New(rdb redis.UniversalClient, opts Options) (*Guard, error) {
	if rdb == nil {
		return nil, fmt.Errorf("headroom: nil Redis client")
	}
	if opts.Percent < 1 || opts.Percent > 99 {
		return nil, fmt.Errorf("headroom: %d%%, want 1 to 99", opts.Percent)
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Timeout <= 0 {
		opts.Timeout = opts.Every
	}
	return &Guard{rdb: rdb, opts: opts, now: time.Now}, nil
}

// A Reading is what a Guard last read of the server (of the fullest
// master of a cluster).
type Reading struct {
	// Node is the address of the server read.
	Node string
	// Used and Max are its used_memory and maxmemory in bytes; Max is 0
	// when maxmemory is not set.
	Used, Max int64
	// Limit is the used_memory past which new names are refused, 0
	// without maxmemory.
	Limit int64
	// At is when it was read.
	At time.Time
}

// Full reports whether used_memory is past the limit.
func (r *Reading) Full() bool { return r != nil && r.Limit > 0 && r.Used > r.Limit }

// Full reports whether new names must be refused now, from the last
// reading; it starts a new reading in the background when that one is
// older than Every. Before the first reading it refuses nothing.
func (g *Guard) Full() bool {
	if g == nil {
		return false
	}
	if g.now().UnixNano() >= g.next.Load() && g.reading.CompareAndSwap(false, true) {
		go func() {
			defer g.reading.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), g.opts.Timeout)
			defer cancel()
			g.Read(ctx) // an error keeps the last reading; the stores' own calls fail meanwhile
		}()
	}
	return g.state.Load().Full()
}

// Refused counts a new name refused by a store and returns the store's
// error kindErr (its ErrNoMemory) wrapped with the limit that was passed.
func (g *Guard) Refused(kindErr error) error {
	if g == nil {
		return kindErr
	}
	g.refused.Add(1)
	r := g.state.Load()
	if r == nil {
		return kindErr
	}
	return fmt.Errorf("%w: Redis %s uses %s of maxmemory %s, past the %s where %d%% is kept for the bot (%s)",
		kindErr, r.Node, mib(r.Used), mib(r.Max), mib(r.Limit), g.opts.Percent, g.opts.Setting)
}

// Refusals is the number of new names refused so far.
func (g *Guard) Refusals() uint64 {
	if g == nil {
		return 0
	}
	return g.refused.Load()
}

// ReadErrors is the number of readings that failed.
func (g *Guard) ReadErrors() uint64 {
	if g == nil {
		return 0
	}
	return g.readErr.Load()
}

// Last returns the last reading, or nil before the first.
func (g *Guard) Last() *Reading {
	if g == nil {
		return nil
	}
	return g.state.Load()
}

// Read reads the server now (every master of a cluster, keeping the
// fullest) and returns the reading, which Full uses from then on.
func (g *Guard) Read(ctx context.Context) (*Reading, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	start := g.now()
	g.next.Store(start.Add(g.opts.Every).UnixNano())
	var worst *Reading
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		var r *Reading
		if err == nil {
			r, err = parse(info, g.opts.Percent)
		}
		if err != nil {
			return fmt.Errorf("headroom: INFO memory of %s: %w", c.Options().Addr, err)
		}
		r.Node, r.At = c.Options().Addr, g.now()
		mu.Lock()
		defer mu.Unlock()
		if worst == nil || r.fuller(worst) {
			worst = r
		}
		return nil
	}
	var err error
	switch c := g.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		err = fmt.Errorf("headroom: unsupported Redis client %T", g.rdb)
	}
	if err != nil {
		g.readErr.Add(1)
		return nil, err
	}
	g.state.Store(worst)
	if worst.Limit > 0 && worst.Used > worst.Limit/2 {
		g.next.Store(start.Add(g.opts.Every / 10).UnixNano())
	}
	return worst, nil
}

// fuller reports whether r is nearer its limit than o (a server without
// maxmemory is the least full).
func (r *Reading) fuller(o *Reading) bool {
	if o.Limit == 0 {
		return r.Limit > 0
	}
	return r.Limit > 0 && float64(r.Used)/float64(r.Limit) > float64(o.Used)/float64(o.Limit)
}

// parse reads used_memory and maxmemory from an INFO memory answer.
func parse(info string, percent int) (*Reading, error) {
	r := &Reading{}
	var haveUsed, haveMax bool
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "used_memory":
			dst, haveUsed = &r.Used, true
		case "maxmemory":
			dst, haveMax = &r.Max, true
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s %q: not a byte count", k, v)
		}
		*dst = n
	}
	if !haveUsed || !haveMax {
		return nil, fmt.Errorf("no used_memory or maxmemory in the answer")
	}
	if r.Max > 0 {
		r.Limit = r.Max / 100 * int64(100-percent)
	}
	return r, nil
}

// mib formats a byte count in MiB.
func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// ifExistsScript runs the command ARGV[1] on KEYS[1] with the rest of ARGV
// if KEYS[1] exists; it answers nil (and changes nothing) if not.
var ifExistsScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))
`)

// IfExists runs the command cmd on key with args in one script, only if
// key exists: the write a store makes while the Guard finds Redis full,
// so that a counter that exists keeps counting and no new one is created.
// Its error is redis.Nil (and nothing changes) if key does not exist.
func IfExists(ctx context.Context, rdb redis.Scripter, cmd, key string, args ...any) *redis.Cmd {
	return ifExistsScript.Run(ctx, rdb, []string{key}, append([]any{cmd}, args...)...)
}
