package redischeck_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redischeck"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestEvictionOnConfiguredServers: the test servers run with the default
// noeviction, on one server and on every cluster master; miniredis has no
// CONFIG GET, like a managed Redis that forbids it, which is an error.
func TestEvictionOnConfiguredServers(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		got, err := redischeck.Eviction(context.Background(), tg.Client)
		if tg.Kind == redistest.Mini {
			if err == nil {
				t.Fatalf("miniredis: no error, got %v", got)
			}
			return
		}
		if err != nil || len(got) != 0 {
			t.Fatalf("Eviction = %v, %v; want none (the test servers keep every key)", got, err)
		}
	})
}

// TestEvictionFindsEvictingPolicy runs its own redis-server configured to
// evict, since the shared servers must not be reconfigured.
func TestEvictionFindsEvictingPolicy(t *testing.T) {
	addr := redistest.StartServer(t, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "64mb")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	got, err := redischeck.Eviction(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Addr != addr || got[0].Policy != "allkeys-lru" {
		t.Fatalf("Eviction = %+v, want [{%s allkeys-lru}]", got, addr)
	}
}
