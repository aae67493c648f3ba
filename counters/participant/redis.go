package participant

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

var (
	//go:embed visit.lua
	visitLua    string
	visitScript = redis.NewScript(headroom.Lua() + visitLua)

	//go:embed leave.lua
	leaveLua    string
	leaveScript = redis.NewScript(leaveLua)

	//go:embed active.lua
	activeLua    string
	activeScript = redis.NewScript(activeLua)
)

// Redis is a Store that keeps each name's set in one Redis sorted set
// (member: key, score: last-seen Unix seconds), shared by every instance
// using the same server and prefix. Each call is one Lua script on one
// key, so it is atomic, and the clock is the server's TIME, read inside
// the script, so all instances agree on it. Every Visit (and VisitMany,
// one call however many keys it carries) sets the set to expire
// timeout+1 seconds later, so idle names disappear by themselves.
// It is safe for concurrent use.
//
// The key of name is base + "p:{" + name + "}": one key per name, so
// every call is on one Redis Cluster slot, and distinct names never share
// a key. (Redis Cluster hashes the name up to its first "}", or the whole
// key for a name starting with "}", so names alike up to a "}" share a
// slot.)
//
// With a Guard (SetGuard), a visit that would create a new name, or make
// a name's set larger (new keys beyond the expired ones it drops), is
// refused with ErrNoMemory while Redis is past the guard's limit; visits
// of keys the set holds keep counting. With a cap (SetMaxKeys), a visit
// that would leave a name with more keys than the cap is refused with
// ErrTooManyKeys. Either refusal changes nothing.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	clock  func() time.Time // nil: the server's TIME
	guard  *headroom.Guard  // nil: new names always created
	cap    *KeyCap          // nil: no cap on keys per name
}

// keyPart follows the service's base prefix in every key of this store.
const keyPart = "p:"

// NewRedis returns a store using rdb, with every key under the service's
// base prefix (for example "vkc:") followed by "p:". A nil rdb is an
// error.
func NewRedis(rdb redis.UniversalClient, base string) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("participant: nil Redis client")
	}
	return &Redis{rdb: rdb, prefix: base + keyPart}, nil
}

// SetGuard makes the store refuse new names while g finds Redis full.
// Call it before the store is used.
func (r *Redis) SetGuard(g *headroom.Guard) { r.guard = g }

// SetMaxKeys caps the keys each name holds with c (nil: no cap). Call it
// before the store is used.
func (r *Redis) SetMaxKeys(c *KeyCap) { r.cap = c }

// WithClock returns a copy of the store that reads the time from clock
// instead of the server's TIME, for tests and replays that need a given
// time. Instances with different clocks disagree on who is active.
func (r *Redis) WithClock(clock func() time.Time) *Redis {
	c := *r
	c.clock = clock
	return &c
}

func (r *Redis) key(name string) string {
	return r.prefix + "{" + name + "}"
}

// now returns the script's now argument: empty means TIME.
func (r *Redis) now() string {
	if r.clock == nil {
		return ""
	}
	return strconv.FormatInt(r.clock().Unix(), 10)
}

// VisitMany records every key of keys as seen now under name, in one
// script call; see Store.
func (r *Redis) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (int, int, error) {
	secs, err := checkVisitMany(name, keys, timeout, nil)
	if err != nil {
		return 0, 0, err
	}
	args := make([]any, 0, 4+len(keys))
	args = append(args, secs, r.now(), r.guard.Check(visitBytes(name, keys)), r.cap.max())
	for i := range keys {
		args = append(args, &keys[i]) // by pointer: a string in an interface costs an allocation
	}
	v, err := visitScript.Run(ctx, r.rdb, []string{r.key(name)}, args...).Result()
	if errors.Is(err, redis.Nil) {
		return 0, 0, r.guard.Refused(ErrNoMemory)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("participant: redis visit: %w", err)
	}
	if v == headroom.GrowthReply {
		return 0, 0, r.guard.RefusedGrowth(ErrNoMemory)
	}
	if a, ok := v.([]any); ok && len(a) == 2 && a[0] == "KEYCAP" {
		n, _ := a[1].(int64)
		return 0, 0, r.cap.refused(name, int(n))
	}
	n, added, err := pair(v, len(keys))
	if err != nil {
		return 0, 0, fmt.Errorf("participant: redis visit: %w", err)
	}
	return n, added, nil
}

// visitBytes bounds what a visit of keys may add to a name's set in
// Redis: each key as a new member (a sorted set's member takes its bytes
// twice, in its dict and its skip list, plus about 100 bytes of entries),
// and the set itself.
func visitBytes(name string, keys []string) int64 {
	n := int64(len(name)) + 128
	for _, k := range keys {
		n += 2*int64(len(k)) + 100
	}
	return n
}

// Leave forgets key under name; see Store.
func (r *Redis) Leave(ctx context.Context, name, key string) (int, bool, error) {
	if err := checkLeave(name, key); err != nil {
		return 0, false, err
	}
	v, err := leaveScript.Run(ctx, r.rdb, []string{r.key(name)}, key).Result()
	if err != nil {
		return 0, false, fmt.Errorf("participant: redis leave: %w", err)
	}
	n, removed, err := pair(v, 1)
	if err != nil {
		return 0, false, fmt.Errorf("participant: redis leave: %w", err)
	}
	return n, removed == 1, nil
}

// Active returns the number of keys under name seen within timeout.
func (r *Redis) Active(ctx context.Context, name string, timeout time.Duration) (int, error) {
	secs, err := checkActive(name, timeout)
	if err != nil {
		return 0, err
	}
	v, err := activeScript.Run(ctx, r.rdb, []string{r.key(name)}, secs, r.now()).Result()
	if err != nil {
		return 0, fmt.Errorf("participant: redis active: %w", err)
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, fmt.Errorf("participant: redis active: unexpected reply %v", v)
	}
	return int(n), nil
}

// pair decodes a {count, m} script reply, where 0 <= m <= maxM.
func pair(v any, maxM int) (int, int, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return 0, 0, fmt.Errorf("unexpected reply %v", v)
	}
	n, ok1 := a[0].(int64)
	m, ok2 := a[1].(int64)
	if !ok1 || !ok2 || n < 0 || m < 0 || m > int64(maxM) {
		return 0, 0, fmt.Errorf("unexpected reply %v", v)
	}
	return int(n), int(m), nil
}
