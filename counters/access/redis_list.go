package access

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

// The Redis store's name index: one sorted set, base + "a:index", holding
// every counter name with score 0, so ZRANGE … BYLEX lists names in byte
// order from any point. A name is added (ZADD, idempotent) before the
// first INCRBY this process sends for it, so a counter is never in Redis
// without its name in the index; a name whose INCRBY then failed is in the
// index without a counter, and List skips it. The cost is one more round
// trip on the first hit of each name per process (and after the cache of
// indexed names is reset), and about the name's length plus 50 bytes of
// memory per counter, all in the one slot of the index key.
//
// Counters created before the index existed are indexed when next hit.

// indexCacheMax bounds the names a Redis store remembers as indexed; when
// full the memory is cleared, and names are indexed again (harmlessly).
const indexCacheMax = 1 << 16

// indexed remembers the names this process has put in the index.
type indexed struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func (x *indexed) has(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.names[name]
	return ok
}

func (x *indexed) add(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.names == nil || len(x.names) >= indexCacheMax {
		x.names = make(map[string]struct{})
	}
	x.names[name] = struct{}{}
}

// indexKey is the key of the name index.
func (r *Redis) indexKey() string { return r.prefix + "index" }

// index puts name in the index unless this process already did.
func (r *Redis) index(ctx context.Context, name string) error {
	if r.indexed.has(name) {
		return nil
	}
	if err := r.rdb.ZAddNX(ctx, r.indexKey(), redis.Z{Member: name}).Err(); err != nil {
		return fmt.Errorf("access: redis index: %w", err)
	}
	r.indexed.add(name)
	return nil
}

// indexCheckedScript adds ARGV[2] to the index KEYS[1] as index does,
// unless it is not there and the server is past its limit for the
// headroom percent ARGV[1]: then it answers nil and changes nothing.
var indexCheckedScript = redis.NewScript(headroom.Lua() + `
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) and headroom_full(ARGV[1]) then return false end
return redis.call('ZADD', KEYS[1], 'NX', 0, ARGV[2])
`)

// indexChecked is index near the guard's limit, with the headroom percent
// pct: a name not in the index is refused with ErrNoMemory while the
// server is past its limit.
func (r *Redis) indexChecked(ctx context.Context, name string, pct int) error {
	err := indexCheckedScript.Run(ctx, r.rdb, []string{r.indexKey()}, pct, name).Err()
	if errors.Is(err, redis.Nil) {
		return r.guard.Refused(ErrNoMemory)
	}
	if err != nil {
		return fmt.Errorf("access: redis index: %w", err)
	}
	r.indexed.add(name)
	return nil
}

// List lists counters by prefix; see Lister. It is one ZRANGE BYLEX on the
// index and one pipeline of GETs (on a cluster, one per node).
func (r *Redis) List(ctx context.Context, prefix, after string, limit int) ([]Entry, bool, error) {
	if err := checkList(prefix, limit); err != nil {
		return nil, false, err
	}
	start := "[" + prefix
	if after >= prefix && after != "" {
		start = "(" + after
	}
	stop := "+"
	if end := prefixEnd(prefix); end != "" {
		stop = "(" + end
	}
	names, err := r.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r.indexKey(), Start: start, Stop: stop, ByLex: true, Count: int64(limit) + 1,
	}).Result()
	if err != nil {
		return nil, false, fmt.Errorf("access: redis list: %w", err)
	}
	more := len(names) > limit
	names = names[:min(len(names), limit)]
	cmds := make([]*redis.StringCmd, len(names))
	if len(names) > 0 {
		_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, n := range names {
				cmds[i] = p.Get(ctx, r.key(n))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("access: redis list: %w", err)
		}
	}
	entries := make([]Entry, 0, len(names))
	for i, c := range cmds {
		total, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			continue // indexed, but its first INCRBY failed
		}
		if err != nil {
			return nil, false, fmt.Errorf("access: redis list %q: %w", names[i], err)
		}
		entries = append(entries, Entry{Name: names[i], Total: total})
	}
	return entries, more, nil
}
