package window

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/headroom"
)

// Redis is a Store in Redis: freq.Windows under a prefix of its own (the
// service's base prefix followed by "w:"), so the counters are exact to the
// second on Redis's clock, and shared by every instance using the same
// server and prefix. The keys of the counter (name, W seconds) are base +
// "w:{" + name + "}:" + W + ":l" and ":n", except for a name starting with
// "}", whose keys are base + "w:{#" + hex of the first 16 bytes of
// SHA-256(name) + "}#:" + W + ":l" and ":n" (see freq.Windows). Each hit or
// count is one script run on one Redis Cluster slot: the hash tag is the
// name up to its first "}" (or that digest). The keys expire a minute
// after the window once a counter goes quiet.
//
// A Hit that fails with a timeout may have counted: it is not idempotent,
// and the client of the Redis connection must not retry it (see
// internal/redisconn). It is safe for concurrent use.
//
// With a Guard (SetGuard), while Redis is past the guard's limit a hit on
// a counter that has no keys, or one in a new second that adds an entry
// to the counter's list while none leaves its window, is refused with
// ErrNoMemory; hits in the second of the newest entry keep counting.
type Redis struct {
	w     *freq.Windows
	clock func() time.Time
	guard *headroom.Guard // nil: new names always created
}

// SetGuard makes the store refuse new names while g finds Redis full.
// Call it before the store is used.
func (r *Redis) SetGuard(g *headroom.Guard) { r.guard = g }

// keyPart follows the service's base prefix in every key of this store.
const keyPart = "w:"

// NewRedis returns a store using rdb, with every key under the service's
// base prefix (for example "vkc:") followed by "w:". A nil rdb is an
// error.
func NewRedis(rdb redis.Scripter, base string) (*Redis, error) {
	w, err := freq.NewWindows(rdb, base+keyPart)
	if err != nil {
		return nil, fmt.Errorf("window: %w", err)
	}
	return &Redis{w: w}, nil
}

// WithClock returns a copy of r that reads the time from clock instead of
// Redis's TIME, for tests that move time; nil means Redis's clock.
func (r *Redis) WithClock(clock func() time.Time) *Redis {
	return &Redis{w: r.w, clock: clock, guard: r.guard}
}

// Load sends the scripts to Redis, so the first calls need not send them.
func (r *Redis) Load(ctx context.Context) error { return r.w.Load(ctx) }

// Hit records one hit; see Store.
func (r *Redis) Hit(ctx context.Context, name string, window time.Duration) (int64, error) {
	if _, err := check(name, window); err != nil {
		return 0, err
	}
	var at time.Time // zero: Redis's clock
	if r.clock != nil {
		at = r.clock()
	}
	n, err := r.w.HitChecked(ctx, name, window, at, r.guard.Check(hitBytes(name)))
	switch {
	case errors.Is(err, freq.ErrNewCounter):
		return 0, r.guard.Refused(ErrNoMemory)
	case errors.Is(err, freq.ErrGrowth):
		return 0, r.guard.RefusedGrowth(ErrNoMemory)
	}
	return n, wrap(err)
}

// hitBytes bounds what a hit may add to Redis: a new counter's two keys
// (the name twice, with their expiry), or an entry of its list.
func hitBytes(name string) int64 { return 2*int64(len(name)) + 256 }

// Count reads a counter; see Store.
func (r *Redis) Count(ctx context.Context, name string, window time.Duration) (int64, error) {
	if _, err := check(name, window); err != nil {
		return 0, err
	}
	var n int64
	var err error
	if r.clock == nil {
		n, err = r.w.Count(ctx, name, window)
	} else {
		n, err = r.w.CountAt(ctx, name, window, r.clock())
	}
	return n, wrap(err)
}

// wrap says which store failed. The name and window were checked before,
// so an error here is Redis's, or freq's refusal of a WithClock time
// outside 1970 to 9999, which keeps wrapping freq.ErrInvalid (the counter
// port answers it Invalid arguments, HTTP 400).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, freq.ErrInvalid) {
		return fmt.Errorf("%w: %w", ErrInvalidTime, err)
	}
	return fmt.Errorf("window: redis: %w", err)
}
