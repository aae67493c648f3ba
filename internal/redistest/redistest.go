// Package redistest runs test bodies against every Redis backend the
// environment offers: always an in-process miniredis, plus the real Redis
// server named by VKCOUNTER_TEST_REDIS and the Redis Cluster named by
// VKCOUNTER_TEST_REDIS_CLUSTER.
//
// A backend that is named but unreachable fails the test. When
// VKCOUNTER_TEST_REQUIRE_REAL=1 (CI sets it) a backend that is not named
// fails the test too, so CI can never pass without having run the
// real-server variants.
//
// Tests share the real servers with other packages running in parallel, so
// they never flush: each test gets its own key prefix from Prefix, whose
// keys are deleted when the test ends. A package's tests run through Main
// (its TestMain), which checks that none was left behind and says how many
// variants were skipped.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Environment variables read by this package.
const (
	// EnvRedis names a real Redis server as a URL, e.g. redis://127.0.0.1:6390/0.
	EnvRedis = "VKCOUNTER_TEST_REDIS"
	// EnvCluster names a Redis Cluster as a comma-separated list of seed addresses.
	EnvCluster = "VKCOUNTER_TEST_REDIS_CLUSTER"
	// EnvRequire, when "1", makes a missing real backend a test failure instead of a skip.
	EnvRequire = "VKCOUNTER_TEST_REQUIRE_REAL"
)

// Kind tells which backend a Target is.
type Kind string

// The backends.
const (
	Mini    Kind = "miniredis"
	Real    Kind = "redis"
	Cluster Kind = "cluster"
)

// A Target is one backend a test body runs against.
type Target struct {
	Kind   Kind
	Client redis.UniversalClient
	// Mini is the in-process server when Kind is Mini, else nil.
	Mini *miniredis.Miniredis
	// Addr is the address of the server (the first seed for a cluster).
	Addr string
	// URL is a redis:// URL for single servers, empty for a cluster.
	URL string
}

// Run runs fn as one subtest per backend in kinds (all three when kinds is
// empty), named after the Kind, one after another.
func Run(t *testing.T, fn func(t *testing.T, tg *Target), kinds ...Kind) {
	t.Helper()
	run(t, false, fn, kinds)
}

// RunParallel is Run with the variants running at the same time, each
// t.Run from a goroutine of its own (testing allows that), and returns
// when all have ended. It is for bodies that mostly wait on wall time
// (leases, stalls, deadlines): their variants then wait together, not one
// after another. The variants share only the process: a body run through
// it must put its keys under its own Prefix and never flush, reconfigure
// or stop a shared server (each variant has a server of its own anyway).
// The variants do not take go test's -parallel slots, so a CPU-bound body
// belongs in Run.
func RunParallel(t *testing.T, fn func(t *testing.T, tg *Target), kinds ...Kind) {
	t.Helper()
	run(t, true, fn, kinds)
}

func run(t *testing.T, together bool, fn func(t *testing.T, tg *Target), kinds []Kind) {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []Kind{Mini, Real, Cluster}
	}
	var wg sync.WaitGroup
	for _, k := range kinds {
		variant := func() {
			t.Run(string(k), func(t *testing.T) {
				fn(t, Open(t, k))
			})
		}
		if together {
			wg.Go(variant)
		} else {
			variant()
		}
	}
	wg.Wait()
}

// Open returns a connected Target of the given kind, closed when t ends.
// It skips the test when the backend is not configured (fails when
// EnvRequire is set) and fails it when the backend is unreachable.
func Open(t testing.TB, k Kind) *Target {
	t.Helper()
	mustRunUnderMain(t)
	switch k {
	case Mini:
		m := miniredis.RunT(t)
		m.ClockTTL(true)
		// miniredis runs Lua in Go: a large script under -race on a loaded
		// machine can take seconds, which redisconn's read timeout outlasts
		// (go-redis's default 3 s would time out and send it again).
		c := open(t, redisconn.Config{Addr: m.Addr()})
		return &Target{Kind: Mini, Client: c, Mini: m, Addr: m.Addr(), URL: "redis://" + m.Addr()}
	case Real:
		u := configured(t, EnvRedis)
		c := open(t, redisconn.Config{URL: u})
		ping(t, c, EnvRedis)
		return &Target{Kind: Real, Client: c, Addr: c.(*redis.Client).Options().Addr, URL: u}
	case Cluster:
		addrs := strings.Split(configured(t, EnvCluster), ",")
		c := open(t, redisconn.Config{Cluster: addrs})
		ping(t, c, EnvCluster)
		return &Target{Kind: Cluster, Client: c, Addr: addrs[0]}
	}
	t.Fatalf("redistest: unknown kind %q", k)
	return nil
}

func configured(t testing.TB, env string) string {
	t.Helper()
	kind := Real
	if env == EnvCluster {
		kind = Cluster
	}
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s is not set but %s=1: the real-server variant of this test must run", env, EnvRequire)
		}
		countVariant(kind, false)
		t.Skipf("%s not set; real-server variant skipped", env)
	}
	countVariant(kind, true)
	return v
}

func ping(t testing.TB, c redis.UniversalClient, env string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but the server does not answer: %v", env, err)
	}
}

// Prefix returns a key prefix unique to this test run, ending in ":".
// Tests put every key they create under it, so they can share a server.
// When t ends, after the cleanups registered after this call (a service
// the test started stops first), every key under it is deleted from the
// real servers the environment names, and Main checks at the end that
// nothing without a TTL was written there since.
func Prefix(t testing.TB) string {
	t.Helper()
	mustRunUnderMain(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	p := "test:" + hex.EncodeToString(b[:]) + ":"
	mu.Lock()
	prefixes = append(prefixes, p)
	mu.Unlock()
	t.Cleanup(func() {
		if err := deletePrefix(p); err != nil {
			t.Errorf("redistest: delete the keys under %s: %v", p, err)
		}
	})
	return p
}

// Keys returns every key under prefix (a SCAN MATCH pattern, to which
// "*" is added), scanning all masters of a cluster.
func Keys(t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	var mu sync.Mutex // eachNode visits a cluster's masters concurrently
	var out []string
	err := eachNode(context.Background(), c, func(ctx context.Context, n redis.Cmdable) error {
		keys, err := scanPrefix(ctx, n, prefix)
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("scan %s*: %v", prefix, err)
	}
	return out
}

// NoRetryClient returns a new client of tg's server, with connections of
// its own, opened as Client is (by redisconn, as the service opens its
// clients: it never resends a command, and a cluster client follows no
// redirection). addr, when not empty, replaces the address of a single
// server (a proxy in front of it). It is closed when t ends.
func (tg *Target) NoRetryClient(t testing.TB, addr string) redis.UniversalClient {
	t.Helper()
	if tg.Kind == Cluster {
		return open(t, redisconn.Config{Cluster: strings.Split(os.Getenv(EnvCluster), ",")})
	}
	u := tg.URL
	if addr != "" {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		pu.Host = addr
		u = pu.String()
	}
	return open(t, redisconn.Config{URL: u})
}

// open returns the client redisconn opens for cfg, closed when t ends.
func open(t testing.TB, cfg redisconn.Config) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
