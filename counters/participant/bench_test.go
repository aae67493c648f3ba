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
	b.Run("memory", func(b *testing.B) { fn(b, participant.NewMemory(nil, participant.MemoryLimits{})) })
	b.Run("file", func(b *testing.B) { fn(b, newFile(b, filepath.Join(b.TempDir(), "bbs.cnt"), nil)) })
	for _, k := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run("redis-"+string(k), func(b *testing.B) {
			tg := redistest.Open(b, k)
			fn(b, newRedis(b, tg.Client, redistest.Prefix(b)))
		})
	}
}

// BenchmarkVisit measures Visits of one name by benchUsers rotating keys
// from 50 goroutines, with the default timeout.
func BenchmarkVisit(b *testing.B) { benchmarkVisit(b, 1) }

// BenchmarkVisitMany measures VisitMany calls of 100 keys each, under the
// same load as BenchmarkVisit.
func BenchmarkVisitMany(b *testing.B) { benchmarkVisit(b, 100) }

// benchmarkVisit runs the visit benchmarks: batch 1 calls Visit, larger
// batches call VisitMany with that many consecutive keys. An op is one
// call; visits/s counts keys recorded per second.
func benchmarkVisit(b *testing.B, batch int) {
	// The first batch keys again at the end, so that every window of
	// batch keys starting below benchUsers is one slice.
	keys := make([]string, benchUsers+batch)
	for i := range keys {
		j := i % benchUsers
		keys[i] = participant.IPKey("10.0." + strconv.Itoa(j/256) + "." + strconv.Itoa(j%256))
	}
	benchStores(b, func(b *testing.B, s participant.Store) {
		ctx := context.Background()
		var next atomic.Int64
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(int64(batch)) % benchUsers)
				var err error
				if batch == 1 {
					_, _, err = participant.Visit(ctx, s, "bench", keys[i], 0)
				} else {
					_, _, err = s.VisitMany(ctx, "bench", keys[i:i+batch], 0)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "visits/s")
	})
}
