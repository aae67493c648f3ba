package participant_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// benchParallelism × GOMAXPROCS goroutines run each benchmark; with
// GOMAXPROCS=2 that is 50, as redis-benchmark -c 50.
const benchParallelism = 25

// benchUsers is the number of distinct keys the benchmarks visit.
const benchUsers = 10000

// benchStores runs fn as one sub-benchmark per store: memory, file, and
// Redis on miniredis and on the real server (when one is configured).
func benchStores(b *testing.B, fn func(b *testing.B, s participant.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, participant.NewMemory(nil)) })
	b.Run("file", func(b *testing.B) { fn(b, newFile(b, filepath.Join(b.TempDir(), "bbs.cnt"), nil)) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			fn(b, participant.NewRedis(tg.Client, redistest.Prefix(b)))
		})
	}
}

// BenchmarkVisit measures Visits of one name by benchUsers rotating keys
// from 50 goroutines, with the default timeout.
func BenchmarkVisit(b *testing.B) {
	keys := make([]string, benchUsers)
	for i := range keys {
		keys[i] = participant.IPKey("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	benchStores(b, func(b *testing.B, s participant.Store) {
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := keys[next.Add(1)%benchUsers]
				if _, _, err := s.Visit(ctx, "bench", key, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "visits/s")
	})
}
