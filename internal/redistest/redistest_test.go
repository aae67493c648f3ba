package redistest

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestPrefixCleanup: the keys a test writes under its Prefix are gone
// from the real servers when it ends, whether they carry a TTL or not; a
// key written there after the test ended, without a TTL, is what Main's
// check reports.
func TestPrefixCleanup(t *testing.T) {
	Run(t, func(t *testing.T, tg *Target) {
		ctx := t.Context()
		var p string
		t.Run("writer", func(t *testing.T) {
			p = Prefix(t)
			for _, k := range []string{"a", "b", "{x}c", "{y}d", "outbox{7}"} { // several slots of a cluster
				if err := tg.Client.Set(ctx, p+k, "v", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := tg.Client.Set(ctx, p+"ttl", "v", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if n := len(Keys(t, tg.Client, p)); n != 6 {
				t.Fatalf("%d keys written, want 6", n)
			}
		})
		if left := Keys(t, tg.Client, p); len(left) != 0 {
			t.Fatalf("keys left after the test ended: %v", left)
		}

		// A late writer (a goroutine outliving its test) is caught.
		late := p + "late"
		if err := tg.Client.Set(ctx, late, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := leftovers(); !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, late+" ("+string(tg.Kind)+")") }) {
			t.Errorf("leftovers() = %v, want %s listed", got, late)
		}
		// With a TTL it would expire: not reported.
		if err := tg.Client.Expire(ctx, late, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if got := leftovers(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, late) }) {
			t.Errorf("leftovers() = %v lists a key with a TTL", got)
		}
		tg.Client.Del(ctx, late)
	}, Real, Cluster)
}

// TestPrefixOf: the prefix a key is under, as Main's check groups keys.
func TestPrefixOf(t *testing.T) {
	for key, want := range map[string]string{
		"test:0a1b2c3d4e5f:outbox{1}": "test:0a1b2c3d4e5f:",
		"test:0a1b2c3d4e5f:":          "test:0a1b2c3d4e5f:",
		"test:bench-1":                "",
	} {
		if got := prefixOf(key); got != want {
			t.Errorf("prefixOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestClientsNeverResend: every client this package opens is opened as
// the service opens its own (redisconn): no retries, no redirections
// followed, redisconn's read timeout; a proxy's address replaces the
// server's own.
func TestClientsNeverResend(t *testing.T) {
	Run(t, func(t *testing.T, tg *Target) {
		proxy := NewProxy(t, tg.Addr)
		clients := map[string]redis.UniversalClient{
			"Client":        tg.Client,
			"NoRetryClient": tg.NoRetryClient(t, ""),
		}
		if tg.Kind != Cluster {
			clients["NoRetryClient via a proxy"] = tg.NoRetryClient(t, proxy.Addr())
		}
		for name, c := range clients {
			// go-redis keeps "no retries" (-1) as 0 in a Client's options,
			// as -1 in a ClusterClient's.
			switch c := c.(type) {
			case *redis.Client:
				if o := c.Options(); o.MaxRetries > 0 || o.ReadTimeout != redisconn.DefaultTimeout {
					t.Errorf("%s: MaxRetries %d, ReadTimeout %v; want none and %v", name, o.MaxRetries, o.ReadTimeout, redisconn.DefaultTimeout)
				}
			case *redis.ClusterClient:
				if o := c.Options(); o.MaxRetries > 0 || o.MaxRedirects != 0 || o.ReadTimeout != redisconn.DefaultTimeout {
					t.Errorf("%s: MaxRetries %d, MaxRedirects %d, ReadTimeout %v; want none, 0 and %v", name, o.MaxRetries, o.MaxRedirects, o.ReadTimeout, redisconn.DefaultTimeout)
				}
			default:
				t.Errorf("%s: a %T", name, c)
			}
			if err := c.Ping(t.Context()).Err(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if got := clients["NoRetryClient via a proxy"]; got != nil {
			if addr := got.(*redis.Client).Options().Addr; addr != proxy.Addr() {
				t.Errorf("NoRetryClient via a proxy connects to %s, want %s", addr, proxy.Addr())
			}
		}
	})
}

// TestRunParallelRunsTheVariantsTogether: RunParallel's variants run at
// the same time (each waits until every one has started, which one after
// another would never see), and it returns only once all have ended.
func TestRunParallelRunsTheVariantsTogether(t *testing.T) {
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	var ended atomic.Int32
	RunParallel(t, func(t *testing.T, tg *Target) {
		if err := tg.Client.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		started.Done()
		select {
		case <-all:
		case <-time.After(time.Minute):
			t.Fatal("the other variants did not start while this one ran")
		}
		ended.Add(1)
	}, Mini, Mini, Mini)
	if got := ended.Load(); got != n {
		t.Fatalf("RunParallel returned with %d of %d variants ended", got, n)
	}
}

// TestRestartedServerOutlivesLaterCleanups: a server RestartServer
// started again is up for the cleanups registered after StartServer (a
// service closing still finds Redis), and gone once the test has ended.
func TestRestartedServerOutlivesLaterCleanups(t *testing.T) {
	var addr string
	t.Run("test", func(t *testing.T) {
		addr = StartServer(t)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() {
			defer c.Close()
			if err := c.Ping(context.Background()).Err(); err != nil {
				t.Errorf("a cleanup registered after StartServer found the restarted server gone: %v", err)
			}
		})
		RestartServer(t, addr)
	})
	if !awaitClosed(addr) {
		t.Errorf("the restarted server on %s still runs after its test ended", addr)
	}
}
