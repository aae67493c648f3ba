package access

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/internal/names"
	"github.com/vkcounter/vkcounter/internal/headroom"
)

// Redis is a Store that keeps each counter in one Redis string,
// incremented with INCRBY, so every instance using the same server and
// prefix shares the counters. It is safe for concurrent use.
//
// The key of counter name is base + "a:{" + name + "}": one key per name,
// and distinct names never share a key. (Redis Cluster hashes the name up
// to its first "}", or the whole key for a name starting with "}", so
// names alike up to a "}" share a slot.) The keys do not expire. A sorted set indexes the names for List (see
// redis_list.go).
//
// With a Guard (SetGuard), a new name is refused with ErrNoMemory while
// the guard finds Redis full: the hit is then one script that increments
// only a counter that exists.
type Redis struct {
	rdb     redis.UniversalClient
	prefix  string
	indexed indexed         // names this process put in the index (see List)
	guard   *headroom.Guard // nil: new names always created
}

// keyPart follows the service's base prefix in every key of this store.
const keyPart = "a:"

// NewRedis returns a store using rdb, with every key under the service's
// base prefix (for example "vkc:") followed by "a:". A nil rdb is an
// error.
func NewRedis(rdb redis.UniversalClient, base string) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("access: nil Redis client")
	}
	return &Redis{rdb: rdb, prefix: base + keyPart}, nil
}

// SetGuard makes the store refuse new names while g finds Redis full.
// Call it before the store is used.
func (r *Redis) SetGuard(g *headroom.Guard) { r.guard = g }

// key returns the Redis key holding the counter name.
func (r *Redis) key(name string) string {
	return r.prefix + "{" + name + "}"
}

// Add adds n (n >= 1) to the counter name with one INCRBY and returns its
// new total. Near the guard's limit (headroom.Guard.Check), a name not
// known to be indexed is indexed by a script that refuses a new entry past
// the limit, and the hit is one script that creates the counter only
// while Redis is not past it: a new name then gets ErrNoMemory. A hit on
// a counter that exists never grows Redis (an integer in place).
func (r *Redis) Add(ctx context.Context, name string, n int64) (int64, error) {
	if err := checkAdd(name, n); err != nil {
		return 0, err
	}
	indexed := r.indexed.has(name)
	var grow int64
	if !indexed {
		grow = newNameBytes(name)
	}
	var total int64
	var err error
	if pct := r.guard.Check(grow); pct > 0 {
		if !indexed {
			if err := r.indexChecked(ctx, name, pct); err != nil {
				return 0, err
			}
		}
		total, err = headroom.IfRoom(ctx, r.rdb, pct, "INCRBY", r.key(name), n).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, r.guard.Refused(ErrNoMemory)
		}
	} else {
		if err := r.index(ctx, name); err != nil {
			return 0, err
		}
		total, err = r.rdb.IncrBy(ctx, r.key(name), n).Result()
	}
	if isOverflow(err) {
		// Redis refuses the INCRBY and leaves the value as it was.
		return 0, fmt.Errorf("%w: adding %d", ErrOverflow, n)
	}
	if err != nil {
		return 0, fmt.Errorf("access: redis add: %w", err)
	}
	return total, nil
}

// newNameBytes bounds what a new counter name takes in Redis: its key and
// value, and its entry in the name index.
func newNameBytes(name string) int64 { return 2*int64(len(name)) + 256 }

// isOverflow reports whether err is the error Redis (and miniredis) answer
// an INCRBY whose result would pass math.MaxInt64 with. A value that is
// not an integer gets a different error ("not an integer or out of
// range"), which this does not match.
func isOverflow(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "would overflow")
}

// Total returns the counter's total, or ErrNotFound if it was never hit.
func (r *Redis) Total(ctx context.Context, name string) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	n, err := r.rdb.Get(ctx, r.key(name)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("access: redis total: %w", err)
	}
	return n, nil
}
