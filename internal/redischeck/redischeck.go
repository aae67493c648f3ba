// Package redischeck inspects the settings of a Redis deployment that the
// service relies on, so that a risky one is reported at start-up.
package redischeck

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// SafePolicy is the only maxmemory-policy under which Redis never drops a
// key the service wrote (the outbox, the dedupe keys, the counts).
const SafePolicy = "noeviction"

// An Evicting server has a maxmemory-policy other than SafePolicy.
type Evicting struct {
	Addr   string // the server's address as the client knows it
	Policy string // its maxmemory-policy
}

// Eviction asks every server behind c (each master of a cluster, each shard
// of a ring) for its maxmemory-policy and returns those that may evict
// keys. It fails where CONFIG GET is not allowed (many managed services).
func Eviction(ctx context.Context, c redis.UniversalClient) ([]Evicting, error) {
	var (
		mu  sync.Mutex
		out []Evicting
	)
	check := func(ctx context.Context, cl *redis.Client) error {
		policy, err := maxmemoryPolicy(ctx, cl)
		if err != nil {
			return fmt.Errorf("%s: %w", cl.Options().Addr, err)
		}
		if policy != SafePolicy {
			mu.Lock()
			out = append(out, Evicting{Addr: cl.Options().Addr, Policy: policy})
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.Client:
		err = check(ctx, c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	default:
		err = fmt.Errorf("unsupported client %T", c)
	}
	return out, err
}

func maxmemoryPolicy(ctx context.Context, c *redis.Client) (string, error) {
	res, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET maxmemory-policy: %w", err)
	}
	p, ok := res["maxmemory-policy"]
	if !ok {
		return "", fmt.Errorf("CONFIG GET maxmemory-policy: not in the answer %v", res)
	}
	return p, nil
}
