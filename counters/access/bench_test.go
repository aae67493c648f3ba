package access_test

import (
	"context"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// benchParallelism × GOMAXPROCS goroutines run each benchmark; with
// GOMAXPROCS=2 that is 50, as redis-benchmark -c 50.
const benchParallelism = 25

// benchStores runs fn as one sub-benchmark per store: memory, file, and
// Redis on miniredis and on the real server (when one is configured).
func benchStores(b *testing.B, fn func(b *testing.B, s access.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, access.NewMemory()) })
	b.Run("file", func(b *testing.B) { fn(b, newFile(b, b.TempDir(), 0)) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			fn(b, access.NewRedis(tg.Client, cleanPrefix(b, tg)))
		})
	}
}

// BenchmarkHit measures Hits on one counter from 50 goroutines.
func BenchmarkHit(b *testing.B) {
	benchStores(b, func(b *testing.B, s access.Store) {
		ctx := context.Background()
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Hit(ctx, "bench"); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hits/s")
	})
}
