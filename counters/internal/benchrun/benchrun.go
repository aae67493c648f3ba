// Package benchrun runs the counter kinds' store benchmarks: one
// operation called from many goroutines, reported as calls per second.
package benchrun

import (
	"context"
	"testing"
)

// Parallel runs op from parallelism × GOMAXPROCS goroutines until b.N
// calls are done, stops at the first error, and reports the calls per
// second as unit.
func Parallel(b *testing.B, parallelism int, unit string, op func(ctx context.Context) error) {
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}
