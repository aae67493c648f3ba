// Package redischeck inspects the settings of a Redis deployment that the
// service relies on, so that a risky one is reported at start-up and a
// server that evicted keys shows in readiness.
package redischeck

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// keys. It reads CONFIG GET maxmemory-policy, or INFO memory's
// maxmemory_policy where CONFIG is not allowed (many managed services:
// ElastiCache, Memorystore, Upstash, a user without @admin); it fails where
// neither is.
func Eviction(ctx context.Context, c redis.UniversalClient) ([]Evicting, error) {
	var (
		mu  sync.Mutex
		out []Evicting
	)
	err := eachServer(ctx, c, func(ctx context.Context, cl *redis.Client) error {
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
	})
	return out, err
}

// Evicted returns the keys the servers behind c have evicted since they
// started (INFO stats' evicted_keys, summed over a cluster's masters).
func Evicted(ctx context.Context, c redis.UniversalClient) (int64, error) {
	var (
		mu    sync.Mutex
		total int64
	)
	err := eachServer(ctx, c, func(ctx context.Context, cl *redis.Client) error {
		info, err := cl.Info(ctx, "stats").Result()
		if err != nil {
			return fmt.Errorf("%s: INFO stats: %w", cl.Options().Addr, err)
		}
		v, ok := Field(info, "evicted_keys")
		n, perr := strconv.ParseInt(v, 10, 64)
		if !ok || perr != nil {
			return fmt.Errorf("%s: INFO stats: no evicted_keys count in the answer", cl.Options().Addr)
		}
		mu.Lock()
		total += n
		mu.Unlock()
		return nil
	})
	return total, err
}

// eachServer calls fn for the server of a single client, each master of a
// cluster and each shard of a ring.
func eachServer(ctx context.Context, c redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.Client:
		return fn(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Ring:
		return c.ForEachShard(ctx, fn)
	}
	return fmt.Errorf("unsupported client %T", c)
}

func maxmemoryPolicy(ctx context.Context, c *redis.Client) (string, error) {
	res, cerr := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if p, ok := res["maxmemory-policy"]; cerr == nil && ok {
		return p, nil
	}
	if cerr == nil {
		cerr = fmt.Errorf("not in the answer %v", res)
	}
	info, ierr := c.Info(ctx, "memory").Result()
	if ierr == nil {
		if p, ok := Field(info, "maxmemory_policy"); ok {
			return p, nil
		}
		ierr = errors.New("no maxmemory_policy in the answer")
	}
	return "", fmt.Errorf("CONFIG GET maxmemory-policy: %w; INFO memory: %w", cerr, ierr)
}

// Field returns the value of the field name of an INFO answer.
func Field(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v, true
		}
	}
	return "", false
}
