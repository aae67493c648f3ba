// Package headroom keeps the counter stores from filling a Redis that
// they share with the bot: once used_memory passes maxmemory less the
// headroom kept for the bot, the stores neither create counter names nor
// grow the names that exist (a new participant key, a new second of a
// window, a unique sketch taking more bytes), until it falls back; what
// exists keeps counting where it does not grow.
//
// Two parts share the work. A Guard reads the server's used_memory and
// maxmemory (INFO memory) now and then: at most once per Options.Every
// (once per Every/10 while used_memory is past half the limit), only when
// a store asks (so an idle service sends no command), and in the
// background (no request waits for it). While that reading, plus the
// growth the stores declared since (Check's grow), is under half the
// limit, the stores write as they would without a guard. Past it, Check
// hands each store's script the headroom, and the script (which starts
// with Lua, headroom_full) reads the server's own used_memory with INFO
// memory before it creates or grows anything, in the same atomic step as
// the write: so no sequence of requests takes used_memory past the limit
// by more than one request's growth, however fast they come. A Redis
// without maxmemory gives the Guard nothing to compare with: it then
// refuses nothing.
package headroom

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
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

// DefaultPercent is the headroom the service keeps by default
// (COUNTERS_REDIS_HEADROOM); MaxPercent is the most Options.Percent may be.
const (
	DefaultPercent = 20
	MaxPercent     = 99
)

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
	grown   atomic.Uint64 // growth refusals
	readErr atomic.Uint64
	pending atomic.Int64 // growth declared to Check since the last reading began
	mu      sync.Mutex   // serializes readings (the background one and Read)
	// unknown is why the guard cannot read used_memory, where it can
	// not: INFO refused to the service's user (no reading), or inside
	// scripts (Check then decides on the Go reading alone); nil when it
	// reads.
	unknown atomic.Pointer[error]
	// blind is set once INFO was found refused inside scripts; probed is
	// set once that was asked.
	blind, probed atomic.Bool
}

// refusedRetry is how long a Guard waits to read again after Redis refused
// INFO (a user without it): no command per request for an answer known.
const refusedRetry = 10 * time.Minute

// New returns a Guard on rdb, or an error if opts is invalid. It sends
// nothing until a store asks.
func New(rdb redis.UniversalClient, opts Options) (*Guard, error) {
	if rdb == nil {
		return nil, fmt.Errorf("headroom: nil Redis client")
	}
	if opts.Percent < 1 || opts.Percent > MaxPercent {
		return nil, fmt.Errorf("headroom: %d%%, want 1 to %d", opts.Percent, MaxPercent)
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

// Full reports whether the last reading is past the limit; it starts a
// new reading in the background when that one is older than Every. Before
// the first reading it is false.
func (g *Guard) Full() bool {
	if g == nil {
		return false
	}
	g.maybeRead()
	return g.state.Load().Full()
}

// Check returns the headroom percent a store passes to its script, whose
// headroom_full (Lua) then compares the server's own used_memory with the
// limit before the script creates or grows anything; or 0 (the script
// reads nothing) while the last reading plus the growth declared since is
// under half the limit, or the server has no maxmemory. grow is the most
// bytes the caller's write may add to Redis; it is declared (until the
// next reading) whatever Check returns. Check starts a new reading in the
// background when the last one is older than Every. Before the first
// reading it returns 0.
//
// Where scripts may not read INFO (some servers refuse it there), Check
// decides on the Go reading alone: 0 until that reading is past the limit,
// then BlindFull, which the scripts' headroom_full takes for full without
// reading anything.
func (g *Guard) Check(grow int64) int {
	if g == nil {
		return 0
	}
	g.maybeRead()
	p := g.pending.Add(grow)
	r := g.state.Load()
	if r == nil || r.Limit == 0 || r.Used+p <= r.Limit/2 {
		return 0
	}
	if g.scriptsBlind() {
		if r.Used+p > r.Limit {
			return BlindFull
		}
		return 0
	}
	return g.opts.Percent
}

// BlindFull is the percent Check hands the scripts when they may not read
// INFO and the Go reading is past the limit: headroom_full is then true.
const BlindFull = 100

// probeScript reads INFO memory inside a script, as headroom_full does.
var probeScript = redis.NewScript(`return redis.pcall('INFO', 'memory')`)

// scriptsBlind reports whether the server refuses INFO inside scripts,
// asking it once (on the first Check past half the limit).
func (g *Guard) scriptsBlind() bool {
	if g.probed.CompareAndSwap(false, true) {
		ctx, cancel := context.WithTimeout(context.Background(), g.opts.Timeout)
		defer cancel()
		res, err := probeScript.Run(ctx, g.rdb, nil).Result() // no key: a user's key patterns do not matter
		if _, ok := res.(string); !ok && err != nil && isRefusal(err) {
			g.blind.Store(true)
			reason := fmt.Errorf("INFO refused inside scripts: %w; new names are refused on the guard's own reading (every %v), not checked in the same step as the write", err, g.opts.Every/10)
			g.unknown.Store(&reason)
		} else if err != nil {
			g.probed.Store(false) // not an answer: ask again next time
		}
	}
	return g.blind.Load()
}

// isRefusal reports whether err is Redis's answer refusing a command (an
// error reply), not a failure to reach it.
func isRefusal(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// Unknown returns why the guard cannot check what it guards, or nil: INFO
// refused to the service's user (the stores then grow unchecked) or inside
// scripts (Check decides on the Go reading alone).
func (g *Guard) Unknown() error {
	if g == nil {
		return nil
	}
	if p := g.unknown.Load(); p != nil {
		return *p
	}
	return nil
}

// maybeRead starts a reading in the background if none is under way and
// the last one is older than its period.
func (g *Guard) maybeRead() {
	if g.now().UnixNano() >= g.next.Load() && g.reading.CompareAndSwap(false, true) {
		go func() {
			defer g.reading.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), g.opts.Timeout)
			defer cancel()
			g.Read(ctx) // an error keeps the last reading; the stores' own calls fail meanwhile
		}()
	}
}

//go:embed headroom.lua
var lua string

// Lua is the Lua a store's script starts with when it takes Check's
// percent: headroom_full(pct), whether the server's used_memory is past
// its limit (maxmemory less pct percent; false for pct 0 or without
// maxmemory), and headroom_growth, the reply GrowthReply of a script that
// refused to grow a name that exists (a script refusing a new name answers
// nil).
//
// Under maxmemory itself, Redis refuses a script's first write if that
// command may take memory, and lets every later write through: a script
// that may grow Redis makes its first write one that may take memory
// (ZADD, RPUSH, INCRBY, PFADD, HSET, SET…), never a deletion, so that
// Redis refuses it whole.
func Lua() string { return lua }

// GrowthReply is the status reply of a script that refused to grow a name
// that exists, as go-redis gives it.
const GrowthReply = "HEADROOM"

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

// RefusedGrowth counts a write that would have grown a name that exists,
// refused by a store's script, and returns the store's error kindErr (its
// ErrNoMemory) wrapped with the limit that was passed.
func (g *Guard) RefusedGrowth(kindErr error) error {
	if g == nil {
		return kindErr
	}
	g.grown.Add(1)
	err := fmt.Errorf("%w: a counter that exists may not grow", kindErr)
	if r := g.state.Load(); r != nil {
		err = fmt.Errorf("%w: Redis %s is past maxmemory %s less the %d%% kept for the bot (%s)",
			err, r.Node, mib(r.Max), g.opts.Percent, g.opts.Setting)
	}
	return err
}

// GrowthRefusals is the number of writes refused because they would have
// grown a name that exists.
func (g *Guard) GrowthRefusals() uint64 {
	if g == nil {
		return 0
	}
	return g.grown.Load()
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
	// The growth declared until now is in this reading (or still on its
	// way to Redis: the next reading has it).
	declared := g.pending.Load()
	worst, err := read(ctx, g.rdb, g.opts.Percent, g.now)
	if err != nil {
		g.readErr.Add(1)
		if isRefusal(err) {
			g.next.Store(start.Add(refusedRetry).UnixNano())
			reason := fmt.Errorf("INFO memory refused: %w; new counter names are not checked against maxmemory", err)
			g.unknown.Store(&reason)
		}
		return nil, err
	}
	if !g.blind.Load() {
		g.unknown.Store(nil)
	}
	g.state.Store(worst)
	g.pending.Add(-declared)
	if worst.Limit > 0 && worst.Used > worst.Limit/2 {
		g.next.Store(start.Add(g.opts.Every / 10).UnixNano())
	}
	return worst, nil
}

// ReadMemory reads used_memory and maxmemory of rdb now (of every master
// of a cluster, keeping the fullest), with the limit of the headroom
// percent (0: Limit is Max). A Reading past its Max is a Redis that
// refuses writes (with noeviction).
func ReadMemory(ctx context.Context, rdb redis.UniversalClient, percent int) (*Reading, error) {
	return read(ctx, rdb, percent, time.Now)
}

func read(ctx context.Context, rdb redis.UniversalClient, percent int, now func() time.Time) (*Reading, error) {
	var worst *Reading
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		var r *Reading
		if err == nil {
			r, err = parse(info, percent)
		}
		if err != nil {
			return fmt.Errorf("headroom: INFO memory of %s: %w", c.Options().Addr, err)
		}
		r.Node, r.At = c.Options().Addr, now()
		mu.Lock()
		defer mu.Unlock()
		if worst == nil || r.fuller(worst) {
			worst = r
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		err = fmt.Errorf("headroom: unsupported Redis client %T", rdb)
	}
	if err != nil {
		return nil, err
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

// checkedScript runs the command ARGV[2] on KEYS[1] with the rest of ARGV
// if KEYS[1] exists, or if it does not and the server is not past its
// limit for the headroom percent ARGV[1]; it answers nil (and changes
// nothing) if not.
var checkedScript = redis.NewScript(lua + `
if redis.call('EXISTS', KEYS[1]) == 0 and headroom_full(ARGV[1]) then return false end
return redis.call(ARGV[2], KEYS[1], unpack(ARGV, 3))
`)

// IfRoom runs the command cmd on key with args in one script: at once if
// key exists, else only if the server is not past its limit for the
// headroom percent pct (Check's): the write of a store whose command
// grows Redis only when it creates key (an access counter's INCRBY). Its
// error is redis.Nil (and nothing changes) when a new key is refused.
func IfRoom(ctx context.Context, rdb redis.Scripter, pct int, cmd, key string, args ...any) *redis.Cmd {
	return checkedScript.Run(ctx, rdb, []string{key}, append([]any{pct, cmd}, args...)...)
}
