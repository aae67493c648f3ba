package access

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store that keeps each counter in one Redis string,
// incremented with INCRBY, so every instance using the same server and
// prefix shares the counters. It is safe for concurrent use.
//
// The key of counter name is prefix + "{" + name + "}": each name has its
// own Redis Cluster hash tag, and distinct names never share a key. The
// keys do not expire.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedis returns a store using rdb, with every key under prefix (for
// example "vkc:a:").
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, prefix: prefix}
}

// key returns the Redis key holding the counter name.
func (r *Redis) key(name string) string {
	return r.prefix + "{" + name + "}"
}

// Hit adds one to the counter name and returns its new total.
func (r *Redis) Hit(ctx context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	n, err := r.rdb.IncrBy(ctx, r.key(name), 1).Result()
	if err != nil {
		return 0, fmt.Errorf("access: redis hit: %w", err)
	}
	return n, nil
}

// Total returns the counter's total, or ErrNotFound if it was never hit.
func (r *Redis) Total(ctx context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
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
