package redischeck_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

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
	addr := startRedis(t, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "64mb")
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

// startRedis starts a redis-server with args on a free loopback port,
// stopped when t ends.
func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.EnvRequire) == "1" {
			t.Fatalf("redis-server not found but %s=1", redistest.EnvRequire)
		}
		t.Skip("redis-server not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", append([]string{"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 250 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(fmt.Errorf("redis-server on %s did not start", addr))
	return ""
}
