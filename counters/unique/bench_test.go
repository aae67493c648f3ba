package unique_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/vkcounter/vkcounter/counters/internal/benchrun"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// benchParallelism × GOMAXPROCS goroutines run each benchmark; with
// GOMAXPROCS=2 that is 50, as redis-benchmark -c 50.
const benchParallelism = 25

// benchStores runs fn as one sub-benchmark per store: memory, and Redis on
// miniredis and on the real server (when one is configured).
func benchStores(b *testing.B, fn func(b *testing.B, s unique.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, unique.NewMemory(unique.MemoryLimits{})) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			prefix := redistest.Prefix(b)
			s, err := unique.NewRedis(tg.Client, prefix)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				for _, key := range redistest.Keys(b, tg.Client, prefix) {
					tg.Client.Del(context.Background(), key)
				}
			})
			fn(b, s)
		})
	}
}

// BenchmarkUniqueAdd measures Adds of one key each (keys 0…99999 in
// turn, as redis-benchmark -r 100000 PFADD) to one counter from 50
// goroutines.
func BenchmarkUniqueAdd(b *testing.B) {
	benchStores(b, func(b *testing.B, s unique.Store) {
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			keys := make([]string, 1)
			for pb.Next() {
				keys[0] = "user:" + strconv.FormatInt(next.Add(1)%100000, 10)
				if _, err := s.Add(ctx, "bench", keys); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "adds/s")
	})
}

// BenchmarkUniqueCount measures Counts of one dense counter (100 000
// keys) from 50 goroutines.
func BenchmarkUniqueCount(b *testing.B) {
	benchStores(b, func(b *testing.B, s unique.Store) {
		ctx := context.Background()
		for i := 0; i < 100000; i += unique.MaxKeys {
			keys := make([]string, unique.MaxKeys)
			for j := range keys {
				keys[j] = strconv.Itoa(i + j)
			}
			if _, err := s.Add(ctx, "bench", keys); err != nil {
				b.Fatal(err)
			}
		}
		benchrun.Parallel(b, benchParallelism, "counts/s", func(ctx context.Context) error {
			_, err := s.Count(ctx, "bench")
			return err
		})
	})
}
