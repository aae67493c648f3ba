package window

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/runlist"
)

// The scripts: window.lua hits a counter, peek.lua reads it, both after
// the layout's library (runlist's count.lua); window.lua checks the
// headroom first. They are run with EVALSHA, falling back to EVAL when
// Redis's script cache does not hold them (after a restart or SCRIPT
// FLUSH).
var (
	//go:embed window.lua
	hitMain string
	//go:embed peek.lua
	peekMain string

	hitScript  = redis.NewScript(headroom.Lua() + runlist.Lua() + hitMain)
	peekScript = redis.NewScript(runlist.Lua() + peekMain)
)

// keyPart follows the service's base prefix in every key of this store.
const keyPart = "w:"

// keyMargin is added to the window for the keys' TTL, so an entry never
// vanishes while it can still be counted, even if the script runs a little
// later than the clock it read.
const keyMargin = time.Minute

// Redis is a Store in Redis, in runlist's list-and-total layout: a
// run-length list of the seconds a counter was hit in and a running
// total, exact to the second on Redis's clock, and shared by every
// instance using the same server and prefix. A hot counter costs at most
// one list entry per second of its window.
//
// The keys of the counter (name, W seconds) are base + "w:{" + name + "}:"
// + W + ":l" (the list) and ":n" (the total). Redis Cluster hashes the part
// of a key between its first "{" and the first "}" after it, so both keys
// of a counter hash the name up to its first "}" (names sharing that part
// share a slot), and each hit or count is one script run on one slot. A
// name starting with "}" would leave that part empty, and the two keys
// would be hashed whole, into different slots; such a name's keys are
// base + "w:{#" + hex of the first 16 bytes of SHA-256(name) + "}#:" + W +
// ":l" and ":n" instead. No other name's keys take that form: theirs have
// "}:" before W, these "}#:". The keys expire a minute after the window
// once a counter goes quiet.
//
// A Hit that fails with a timeout may have counted: it is not idempotent,
// and the client of the Redis connection must not retry it (see
// internal/redisconn). Count is: it only drops what left the window. It is
// safe for concurrent use.
//
// With a Guard (SetGuard), while Redis is past the guard's limit a hit on
// a counter that has no keys, or one in a new second that adds an entry
// to the counter's list while none leaves its window, is refused with
// ErrNoMemory; hits in the second of the newest entry keep counting.
type Redis struct {
	rdb    redis.Scripter
	prefix string
	clock  func() time.Time
	guard  *headroom.Guard // nil: new names always created
}

// SetGuard makes the store refuse new names while g finds Redis full.
// Call it before the store is used.
func (r *Redis) SetGuard(g *headroom.Guard) { r.guard = g }

// NewRedis returns a store using rdb (a *redis.Client, *redis.Ring or
// *redis.ClusterClient), with every key under the service's base prefix
// (for example "vkc:") followed by "w:". A nil rdb is an error. It does
// not contact Redis.
func NewRedis(rdb redis.Scripter, base string) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("window: nil Redis client")
	}
	return &Redis{rdb: rdb, prefix: base + keyPart}, nil
}

// WithClock returns a copy of r that reads the time from clock instead of
// Redis's TIME, for tests that move time; nil means Redis's clock. A time
// before the newest second a counter recorded counts at that second.
func (r *Redis) WithClock(clock func() time.Time) *Redis {
	c := *r
	c.clock = clock
	return &c
}

// Load sends the scripts to Redis (SCRIPT LOAD), so the first calls need
// not send their source.
func (r *Redis) Load(ctx context.Context) error {
	for _, sc := range []*redis.Script{hitScript, peekScript} {
		if err := sc.Load(ctx, r.rdb).Err(); err != nil {
			return fmt.Errorf("window: redis: load script: %w", err)
		}
	}
	return nil
}

// Hit records one hit; see Store. Past the guard's headroom, the check and
// the hit are one script run.
func (r *Redis) Hit(ctx context.Context, name string, window time.Duration) (int64, error) {
	keys, args, err := r.call(name, window)
	if err != nil {
		return 0, err
	}
	pct := r.guard.Check(hitBytes(name))
	v, err := hitScript.Run(ctx, r.rdb, keys, args[0], args[1], args[2], pct).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, r.guard.Refused(ErrNoMemory)
	case err != nil:
		return 0, fmt.Errorf("window: redis: hit: %w", err)
	case v == headroom.GrowthReply:
		return 0, r.guard.RefusedGrowth(ErrNoMemory)
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, fmt.Errorf("window: redis: unexpected hit reply %#v", v)
	}
	return n, nil
}

// hitBytes bounds what a hit may add to Redis: a new counter's two keys
// (the name twice, with their expiry), or an entry of its list.
func hitBytes(name string) int64 { return 2*int64(len(name)) + 256 }

// Count reads a counter; see Store.
func (r *Redis) Count(ctx context.Context, name string, window time.Duration) (int64, error) {
	keys, args, err := r.call(name, window)
	if err != nil {
		return 0, err
	}
	n, err := peekScript.Run(ctx, r.rdb, keys, args[0], args[2]).Int64()
	if err != nil {
		return 0, fmt.Errorf("window: redis: count: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("window: redis: unexpected count reply %d", n)
	}
	return n, nil
}

// call checks the arguments of a Hit or Count and returns the counter's
// keys and the scripts' arguments: the window and the keys' TTL in
// seconds, and the time to count at ("" for Redis's clock).
func (r *Redis) call(name string, window time.Duration) (keys []string, args [3]string, err error) {
	secs, err := check(name, window)
	if err != nil {
		return nil, args, err
	}
	args[0] = strconv.FormatInt(secs, 10)
	args[1] = strconv.FormatInt(int64((window+keyMargin)/time.Second), 10)
	if r.clock != nil {
		at := r.clock()
		var ok bool
		if args[2], ok = runlist.TimeArg(at); !ok {
			return nil, args, fmt.Errorf("%w: %v is outside 1970 to 9999", ErrInvalidTime, at)
		}
	}
	base := r.prefix + nameTag(name) + ":" + args[0] + ":"
	return []string{base + "l", base + "n"}, args, nil
}

// nameTag returns the part of a counter's keys that holds its Redis
// Cluster hash tag: "{" + name + "}", or, for a name whose tag would be
// empty (it starts with "}"), "{#" + digest + "}#" (see Redis).
func nameTag(name string) string {
	if !strings.HasPrefix(name, "}") {
		return "{" + name + "}"
	}
	sum := sha256.Sum256([]byte(name))
	return "{#" + hex.EncodeToString(sum[:16]) + "}#"
}
