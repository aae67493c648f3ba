package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

// An OnceAdder is a Store whose Add can end with an unknown outcome (a
// request that timed out may still have been applied, as with Redis), and
// that can make a retry of it harmless. Stores in this process (Memory,
// File) know the outcome of every Add and need no such method.
type OnceAdder interface {
	// AddOnce is Add, applied at most once per token: a later call with
	// the same name and token, within OnceFor, changes nothing and returns
	// the counter's current total.
	AddOnce(ctx context.Context, name string, n int64, token string) (int64, error)
}

var _ OnceAdder = (*Redis)(nil)

// OnceFor is how long a Redis store remembers an AddOnce token.
const OnceFor = time.Hour

// addOnceScript adds ARGV[1] to KEYS[1] unless the token key KEYS[2]
// exists, then creates the token key for ARGV[2] milliseconds. It answers
// the counter's total, or nil (changing nothing) when KEYS[1] does not
// exist and the server is past its limit for the headroom percent ARGV[3]
// (see headroom.Lua): a new name refused. Its first write is the INCRBY,
// which Redis refuses under maxmemory.
var addOnceScript = redis.NewScript(headroom.Lua() + `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return tonumber(redis.call('GET', KEYS[1]) or '0')
end
if redis.call('EXISTS', KEYS[1]) == 0 and headroom_full(ARGV[3]) then
  return false
end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return total
`)

// AddOnce adds n to the counter name unless a call with the same token
// already did, within OnceFor. The token's key shares the counter's hash
// tag, so the script touches one cluster slot. An empty token is an error.
func (r *Redis) AddOnce(ctx context.Context, name string, n int64, token string) (int64, error) {
	if err := checkAdd(name, n); err != nil {
		return 0, err
	}
	if token == "" {
		return 0, fmt.Errorf("access: AddOnce with an empty token")
	}
	indexed := r.indexed.has(name)
	grow := int64(len(name)+len(token)) + 128 // the token key
	if !indexed {
		grow += newNameBytes(name)
	}
	pct := r.guard.Check(grow)
	var err error
	if pct > 0 && !indexed { // as in Add
		err = r.indexChecked(ctx, name, pct)
	} else {
		err = r.index(ctx, name)
	}
	if err != nil {
		return 0, err
	}
	total, err := addOnceScript.Run(ctx, r.rdb, []string{r.key(name), r.key(name) + ":once:" + token}, n, OnceFor.Milliseconds(), pct).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, r.guard.Refused(ErrNoMemory)
	}
	if isOverflow(err) {
		return 0, fmt.Errorf("%w: adding %d", ErrOverflow, n)
	}
	if err != nil {
		return 0, fmt.Errorf("access: redis add once: %w", err)
	}
	return total, nil
}
