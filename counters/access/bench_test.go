package access_test

import (
	"context"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/internal/benchrun"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// benchParallelism × GOMAXPROCS goroutines run each benchmark; with
// GOMAXPROCS=2 that is 50, as redis-benchmark -c 50.
const benchParallelism = 25

// benchStores runs fn as one sub-benchmark per store: memory, file, and
// Redis on miniredis and on the real server (when one is configured).
func benchStores(b *testing.B, fn func(b *testing.B, s access.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, access.NewMemory(access.MemoryLimits{})) })
	b.Run("file", func(b *testing.B) { fn(b, newFile(b, b.TempDir(), 0)) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			fn(b, newRedis(b, tg.Client, cleanPrefix(b, tg)))
		})
	}
}

// BenchmarkHit measures Hits on one counter from 50 goroutines.
func BenchmarkHit(b *testing.B) {
	benchmarkCount(b, "hits/s", func(ctx context.Context, s access.Store) error {
		_, err := access.Hit(ctx, s, "bench")
		return err
	})
}

// BenchmarkAdd measures Add(ctx, name, 100) on one counter from 50
// goroutines, beside BenchmarkHit: one Add counts 100 hits.
func BenchmarkAdd(b *testing.B) {
	benchmarkCount(b, "adds/s", func(ctx context.Context, s access.Store) error {
		_, err := s.Add(ctx, "bench", 100)
		return err
	})
}

// benchmarkCount runs op on every store from 50 goroutines and reports
// the calls per second as unit.
func benchmarkCount(b *testing.B, unit string, op func(ctx context.Context, s access.Store) error) {
	benchStores(b, func(b *testing.B, s access.Store) { benchmarkCountOn(b, s, unit, op) })
}

// benchmarkCountOn runs op on s from 50 goroutines and reports the calls
// per second as unit.
func benchmarkCountOn(b *testing.B, s access.Store, unit string, op func(ctx context.Context, s access.Store) error) {
	benchrun.Parallel(b, benchParallelism, unit, func(ctx context.Context) error { return op(ctx, s) })
}

// BenchmarkHitPastHeadroom measures a hit on an existing counter with the
// headroom guard finding Redis full (a script that checks the key, then
// INCRBY) beside the plain INCRBY, on a Redis of the benchmark's own.
func BenchmarkHitPastHeadroom(b *testing.B) {
	addr := redistest.StartServer(b, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction")
	rdb, err := redisconn.Open(redisconn.Config{Addr: addr})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	g, err := headroom.New(rdb, headroom.Options{Percent: 99}) // an empty Redis is past 1% of 64 MiB
	if err != nil {
		b.Fatal(err)
	}
	if r, err := g.Read(context.Background()); err != nil || !r.Full() {
		b.Fatalf("reading %+v, %v: want full", r, err)
	}
	for _, guard := range []*headroom.Guard{nil, g} {
		name := "plain"
		if guard != nil {
			name = "past-headroom"
		}
		b.Run(name, func(b *testing.B) {
			s := newRedis(b, rdb, "bench:")
			if _, err := s.Add(context.Background(), "bench", 1); err != nil {
				b.Fatal(err)
			}
			s.SetGuard(guard)
			benchmarkCountOn(b, s, "hits/s", func(ctx context.Context, s access.Store) error {
				_, err := access.Hit(ctx, s, "bench")
				return err
			})
		})
	}
}
