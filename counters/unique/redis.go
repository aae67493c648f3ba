package unique

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/internal/hll"
	"github.com/vkcounter/vkcounter/internal/headroom"
)

// Redis is a Store in Redis: one HyperLogLog per name at base + "u:{" +
// name + "}" (base is the service's base prefix), added to with PFADD and read with PFCOUNT, shared by every
// instance using the same server and prefix. The keys do not expire.
//
// PFADD is idempotent, so an Add whose outcome is unknown (a timeout) may
// be sent again safely. A union over several names on a single server is
// one transaction (MULTI: PFMERGE into a temporary key, PFCOUNT it, DEL
// it), which is what PFCOUNT of several keys does inside Redis; PFCOUNT of
// several keys itself is not used because miniredis (the embedded Redis)
// adds up the keys' counts instead. On a Cluster or Ring, where the names
// live in different slots, the store reads each name's value (GET, one
// pipeline) and merges the registers itself with Redis's estimator, so the
// answer is the one PFCOUNT would give. It is safe for concurrent use.
//
// With a Guard (SetGuard), while Redis is past the guard's limit an Add
// to a new name, or one that would make a sparse HyperLogLog longer
// (including its turning dense), is refused with ErrNoMemory; adds that
// change no register, and adds to a dense one, keep counting. Near the
// limit an add is one script that checks, in the same step, the server's
// used_memory.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	// spread is true when the names may live on different servers.
	spread bool
	guard  *headroom.Guard // nil: new names always created
}

// SetGuard makes the store refuse new names while g finds Redis full.
// Call it before the store is used.
func (r *Redis) SetGuard(g *headroom.Guard) { r.guard = g }

// keyPart follows the service's base prefix in every key of this store.
const keyPart = "u:"

// NewRedis returns a store using rdb, with every key under the service's
// base prefix (for example "vkc:") followed by "u:". A nil rdb is an
// error.
func NewRedis(rdb redis.UniversalClient, base string) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("unique: nil Redis client")
	}
	r := &Redis{rdb: rdb, prefix: base + keyPart}
	switch rdb.(type) {
	case *redis.ClusterClient, *redis.Ring:
		r.spread = true
	}
	return r, nil
}

func (r *Redis) key(name string) string { return r.prefix + "{" + name + "}" }

// Add adds keys to name with one PFADD; see Store.
func (r *Redis) Add(ctx context.Context, name string, keys []string) (bool, error) {
	if err := checkAdd(name, keys); err != nil {
		return false, err
	}
	args := make([]any, len(keys))
	for i := range keys {
		args[i] = &keys[i] // by pointer: a string in an interface costs an allocation
	}
	var n int64
	var err error
	if pct := r.guard.Check(addBytes(name, keys)); pct > 0 {
		var v any
		v, err = addCheckedScript.Run(ctx, r.rdb, []string{r.key(name)}, append([]any{pct}, args...)...).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return false, r.guard.Refused(ErrNoMemory)
		case v == headroom.GrowthReply:
			return false, r.guard.RefusedGrowth(ErrNoMemory)
		case err == nil:
			n, _ = v.(int64)
		}
	} else {
		n, err = r.rdb.PFAdd(ctx, r.key(name), args...).Result()
	}
	if err != nil {
		return false, fmt.Errorf("unique: redis add: %w", err)
	}
	return n == 1, nil
}

// addCheckedScript is the PFADD of ARGV[2..] to KEYS[1] past half the
// guard's limit, checking the server's used_memory against the headroom
// percent ARGV[1] (see headroom.Lua): a new sketch is refused (nil) past
// the limit, and so is an add that makes a sparse sketch longer
// (headroom_growth: it is put back as it was). A dense sketch has its
// full size: adds to it always count. Its first write is the PFADD, which
// Redis refuses under maxmemory.
var addCheckedScript = redis.NewScript(headroom.Lua() + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  if headroom_full(ARGV[1]) then return false end
  return redis.call('PFADD', KEYS[1], unpack(ARGV, 2))
end
if redis.call('GETRANGE', KEYS[1], 4, 4) == '\0' or not headroom_full(ARGV[1]) then
  return redis.call('PFADD', KEYS[1], unpack(ARGV, 2))
end
local before = redis.call('GET', KEYS[1])
local changed = redis.call('PFADD', KEYS[1], unpack(ARGV, 2))
if redis.call('STRLEN', KEYS[1]) > #before then
  redis.call('SET', KEYS[1], before, 'KEEPTTL')
  return headroom_growth
end
return changed
`)

// addBytes bounds what an add may add to Redis: a new sketch (the name,
// and a sparse sketch of up to the keys' registers), or its turning dense
// (hll.Registers bytes).
func addBytes(name string, keys []string) int64 {
	return int64(len(name)) + hll.Registers + 8*int64(len(keys)) + 128
}

// Count estimates the union of names; see Store. An estimate of 0 means
// no name exists: an Add always raises a register.
func (r *Redis) Count(ctx context.Context, names ...string) (int64, error) {
	if err := checkCount(names); err != nil {
		return 0, err
	}
	var n int64
	var err error
	switch {
	case len(names) == 1:
		n, err = r.rdb.PFCount(ctx, r.key(names[0])).Result()
	case r.spread:
		n, err = r.merge(ctx, names)
	default:
		n, err = r.union(ctx, names)
	}
	if err != nil {
		return 0, fmt.Errorf("unique: redis count: %w", err)
	}
	if n == 0 {
		return 0, ErrNotFound
	}
	return n, nil
}

// union estimates the union of names on a single server in one
// transaction that leaves nothing behind.
func (r *Redis) union(ctx context.Context, names []string) (int64, error) {
	var id [8]byte
	rand.Read(id[:])
	tmp := r.prefix + "union:" + hex.EncodeToString(id[:])
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = r.key(name)
	}
	var count *redis.IntCmd
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.PFMerge(ctx, tmp, keys...)
		count = p.PFCount(ctx, tmp)
		p.Del(ctx, tmp)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return count.Val(), nil
}

// merge reads every name's value and estimates the union of their
// registers.
func (r *Redis) merge(ctx context.Context, names []string) (int64, error) {
	cmds := make([]*redis.StringCmd, len(names))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = p.Get(ctx, r.key(name))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var regs [hll.Registers]uint8
	for i, c := range cmds {
		v, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if err := hll.DecodeInto(&regs, v); err != nil {
			return 0, fmt.Errorf("%s: %w", names[i], err)
		}
	}
	return int64(hll.Estimate(&regs)), nil
}
