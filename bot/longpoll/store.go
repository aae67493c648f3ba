package longpoll

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Store keeps, per community, the lease that makes one poller of all
// instances the active one, and the ts up to which that poller handled the
// events. RedisStore is the one the service uses.
type Store interface {
	// Hold takes the lease of group for owner, or renews it, for ttl. False
	// means another owner holds it.
	Hold(ctx context.Context, group int, owner string, ttl time.Duration) (bool, error)
	// Release gives up owner's lease of group, if it holds it.
	Release(ctx context.Context, group int, owner string) error
	// TS returns the saved ts of group, "" if none was saved.
	TS(ctx context.Context, group int) (string, error)
	// SaveTS saves ts for group if owner holds the lease. False means it
	// does not: another poller took over.
	SaveTS(ctx context.Context, group int, owner, ts string) (bool, error)
}

var (
	//go:embed hold.lua
	holdLua    string
	holdScript = redis.NewScript(holdLua)

	//go:embed save.lua
	saveLua    string
	saveScript = redis.NewScript(saveLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// rediser is what RedisStore needs of a go-redis client; Client,
// ClusterClient and Ring have it.
type rediser interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
}

// RedisStore is a Store in Redis. The lease and the ts of a community share
// a hash tag, so a script touching both runs on one Cluster node.
//
// Give it a client that never re-sends a command (internal/redisconn's,
// MaxRetries -1), like every client of the service. Each call is still safe
// to repeat, or to run late, after the poller gave up on it: Hold takes a
// lease that is free or already its owner's, SaveTS writes only while its
// owner holds the lease, Release deletes only its owner's lease, and TS
// reads. One late run has an effect: a Hold that runs after its poller's
// Release takes the lease again for that poller, which has stopped; the
// other instances then take over when that lease runs out (LeaseTTL), not
// at once.
type RedisStore struct {
	rdb    rediser
	prefix string
}

var _ Store = (*RedisStore)(nil)

// keyPart follows the service's base prefix in every key of the store.
const keyPart = "l:"

// NewRedisStore returns a Store on rdb keeping its keys under the
// service's base prefix (for example "vkc:") followed by "l:". A nil rdb is
// an error.
func NewRedisStore(rdb rediser, base string) (*RedisStore, error) {
	if rdb == nil {
		return nil, errors.New("longpoll: NewRedisStore needs a Redis client")
	}
	return &RedisStore{rdb: rdb, prefix: base + keyPart}, nil
}

func (s *RedisStore) keys(group int) (lease, ts string) {
	tag := s.prefix + "{" + strconv.Itoa(group) + "}"
	return tag + ":lease", tag + ":ts"
}

// Hold implements Store.
func (s *RedisStore) Hold(ctx context.Context, group int, owner string, ttl time.Duration) (bool, error) {
	lease, _ := s.keys(group)
	n, err := holdScript.Run(ctx, s.rdb, []string{lease}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("longpoll: lease of %d: %w", group, err)
	}
	return n == 1, nil
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, group int, owner string) error {
	lease, _ := s.keys(group)
	if err := releaseScript.Run(ctx, s.rdb, []string{lease}, owner).Err(); err != nil {
		return fmt.Errorf("longpoll: release the lease of %d: %w", group, err)
	}
	return nil
}

// TS implements Store.
func (s *RedisStore) TS(ctx context.Context, group int) (string, error) {
	_, key := s.keys(group)
	ts, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("longpoll: ts of %d: %w", group, err)
	}
	return ts, nil
}

// SaveTS implements Store.
func (s *RedisStore) SaveTS(ctx context.Context, group int, owner, ts string) (bool, error) {
	lease, key := s.keys(group)
	n, err := saveScript.Run(ctx, s.rdb, []string{lease, key}, owner, ts).Int()
	if err != nil {
		return false, fmt.Errorf("longpoll: save the ts of %d: %w", group, err)
	}
	return n == 1, nil
}
