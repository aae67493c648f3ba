package window_test

import (
	"context"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/benchrun"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// benchParallelism × GOMAXPROCS goroutines run each benchmark; with
// GOMAXPROCS=2 that is 50, as redis-benchmark -c 50.
const benchParallelism = 25

// benchStores runs fn as one sub-benchmark per store: memory, and Redis on
// miniredis and on the real server (when one is configured).
func benchStores(b *testing.B, fn func(b *testing.B, s window.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, window.NewMemory(nil, window.MemoryLimits{})) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			s, err := window.NewRedis(tg.Client, redistest.Prefix(b))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Load(context.Background()); err != nil {
				b.Fatal(err)
			}
			fn(b, s)
		})
	}
}

// BenchmarkWindowHit measures Hits on one hot counter (a 1-hour window)
// from 50 goroutines: the case redis-benchmark runs the same script in.
func BenchmarkWindowHit(b *testing.B) {
	benchmarkOp(b, "hits/s", func(ctx context.Context, s window.Store) error {
		_, err := s.Hit(ctx, "bench", time.Hour)
		return err
	})
}

// BenchmarkWindowCount measures Counts of one hot counter.
func BenchmarkWindowCount(b *testing.B) {
	benchmarkOp(b, "counts/s", func(ctx context.Context, s window.Store) error {
		_, err := s.Count(ctx, "bench", time.Hour)
		return err
	})
}

func benchmarkOp(b *testing.B, unit string, op func(ctx context.Context, s window.Store) error) {
	benchStores(b, func(b *testing.B, s window.Store) {
		benchrun.Parallel(b, benchParallelism, unit, func(ctx context.Context) error { return op(ctx, s) })
	})
}
