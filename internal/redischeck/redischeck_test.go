package redischeck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redischeck"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestEvictionOnConfiguredServers: the test servers run with the default
// noeviction, on one server and on every cluster master; miniredis has no
// CONFIG GET nor INFO memory, like a managed Redis that forbids both,
// which is an error; so is a user refused both (CI's managed profile).
func TestEvictionOnConfiguredServers(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		got, err := redischeck.Eviction(context.Background(), tg.Client)
		if tg.Kind == redistest.Mini || (err != nil && strings.Contains(err.Error(), "NOPERM")) {
			if err == nil || !strings.Contains(err.Error(), "CONFIG GET") || !strings.Contains(err.Error(), "INFO memory") {
				t.Fatalf("%s: Eviction = %v, %v; want an error naming CONFIG GET and INFO memory", tg.Kind, got, err)
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

// TestEvictionWithoutConfig: a user without CONFIG (a managed service's)
// still learns the policy, from INFO memory; without INFO either, the
// error says both were refused.
func TestEvictionWithoutConfig(t *testing.T) {
	addr := redistest.StartServer(t, "--maxmemory-policy", "volatile-lru", "--maxmemory", "64mb")
	for _, tc := range []struct {
		rules []string
		want  string
	}{
		{[]string{"+@all", "-config"}, "volatile-lru"},
		{redistest.ManagedProfile, ""},
	} {
		opt, err := redis.ParseURL(redistest.ACLUser(t, addr, "svc", tc.rules...))
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opt)
		got, err := redischeck.Eviction(context.Background(), c)
		c.Close()
		switch {
		case tc.want != "" && (err != nil || len(got) != 1 || got[0].Policy != tc.want):
			t.Errorf("%v: Eviction = %+v, %v; want %s", tc.rules, got, err, tc.want)
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "CONFIG GET") || !strings.Contains(err.Error(), "INFO memory")):
			t.Errorf("%v: Eviction = %+v, %v; want an error naming CONFIG GET and INFO memory", tc.rules, got, err)
		}
	}
}

// TestEvicted: a server with a small maxmemory and an evicting policy
// counts the keys it evicted.
func TestEvicted(t *testing.T) {
	addr := redistest.StartServer(t, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "2mb")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	if n, err := redischeck.Evicted(ctx, c); err != nil || n != 0 {
		t.Fatalf("Evicted on an empty server = %d, %v", n, err)
	}
	big := strings.Repeat("x", 64<<10)
	for i := range 100 { // 6.4 MB into 2
		if err := c.Set(ctx, fmt.Sprint("k", i), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := redischeck.Evicted(ctx, c); err != nil || n == 0 {
		t.Fatalf("Evicted after 6.4 MB into 2 MB = %d, %v; want some", n, err)
	}
}
