package resource_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/vkcounter/vkcounter/counters/resource"
)

// BenchmarkTableAcquireRelease: acquire+release pairs on 1000 names from
// GOMAXPROCS goroutines, each pair taking a counter from 0 and back (the
// path that keeps the line of counters at 0 to reclaim).
func BenchmarkTableAcquireRelease(b *testing.B) {
	tab, err := resource.New(resource.Options{})
	if err != nil {
		b.Fatal(err)
	}
	names := make([][]byte, 1000)
	for i := range names {
		names[i] = []byte("bench-" + strconv.Itoa(i))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		h := tab.NewHolder()
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			name := names[i%len(names)]
			i++
			if err := h.Acquire(name, 1, 1<<30); err != nil {
				b.Error(err)
				return
			}
			if err := h.Release(name, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
