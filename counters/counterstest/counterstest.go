// Package counterstest serves a real counter server on a loopback port for
// tests, in the manner of net/http/httptest.
package counterstest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/resource"
)

// NewServer returns a server with opts, closed at the end of the test.
func NewServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	t.Helper()
	s, err := counters.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Listen serves s on 127.0.0.1:0 and returns its address. At the end of the
// test s is closed and Serve must have returned ErrServerClosed.
func Listen(t testing.TB, s *counters.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, counters.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// Start is NewServer then Listen: a server with opts on a loopback port.
func Start(t testing.TB, opts counters.ServerOptions) string {
	t.Helper()
	return Listen(t, NewServer(t, opts))
}

// StartRedis starts a server whose resource counters live in Redis through
// rdb (a client that never retries) under prefix, with the given lease (0
// for the default) and the default statistics interval, and returns its
// address. Servers started with the same Redis and prefix share their
// counters. The prefix must be the test's own, since the store grants at
// once (resource.RedisOptions.AssumeNoHolders). The server closes before
// its store at the end of the test.
func StartRedis(t testing.TB, rdb redis.UniversalClient, prefix string, lease time.Duration) string {
	t.Helper()
	r, err := resource.NewRedis(context.Background(), rdb, resource.RedisOptions{Prefix: prefix, Lease: lease, AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// Registered after the store's cleanup, so the server closes first,
	// releasing its connections' holdings.
	stores := counters.MemoryStores(nil)
	stores.Timeout = 10 * time.Second
	return Start(t, counters.ServerOptions{Resources: counters.RedisResources(r), Stores: stores})
}
