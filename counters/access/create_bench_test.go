package access_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap/memcaptest"
)

// sortedSlice is the memory store as it was before its B-tree, kept as the
// reference of BenchmarkCreate: a map of totals and every name in a sorted
// slice, into which each new name is inserted (O(n) under the lock).
type sortedSlice struct {
	mu     sync.Mutex
	totals map[string]int64
	names  []string
}

func (s *sortedSlice) Add(_ context.Context, name string, n int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.totals[name]
	if !ok {
		i, _ := slices.BinarySearch(s.names, name)
		s.names = slices.Insert(s.names, i, name)
	}
	s.totals[name] = prev + n
	return prev + n, nil
}

// benchName is the name of counter i: short, and in random byte order.
func benchName(i uint64) string {
	return fmt.Sprintf("page:%016x", rand.New(rand.NewPCG(i, 7)).Uint64())
}

// BenchmarkCreate measures the creation of a name in a store that holds 1 M
// or 5 M names already (short names in random order, so each lands at a
// random place in the order), for the memory store and, as the reference
// in the same run, the sorted slice it replaced. Run it alone, e.g.
//
//	go test -run '^$' -bench Create -benchtime 2000x ./counters/access/
//
// B/name is the Go heap per name held after the fill.
func BenchmarkCreate(b *testing.B) {
	for _, n := range []int{1_000_000, 5_000_000} {
		for _, kind := range []string{"sorted-slice", "memory"} {
			b.Run(fmt.Sprintf("%s/%dM", kind, n/1_000_000), func(b *testing.B) {
				ctx := context.Background()
				heap := memcaptest.HeapAlloc()
				var s interface {
					Add(context.Context, string, int64) (int64, error)
				}
				if kind == "memory" {
					m := access.NewMemory(access.MemoryLimits{MaxNames: 2 * n, MaxBytes: 1 << 40})
					for i := range n {
						if _, err := m.Add(ctx, benchName(uint64(i)), 1); err != nil {
							b.Fatal(err)
						}
					}
					s = m
				} else {
					// Filled at once: inserting 5 M names one by one into
					// the slice would take hours.
					ss := &sortedSlice{totals: make(map[string]int64)}
					for i := range n {
						name := benchName(uint64(i))
						ss.totals[name] = 1
						ss.names = append(ss.names, name)
					}
					slices.Sort(ss.names)
					s = ss
				}
				perName := float64(memcaptest.HeapAlloc()-heap) / float64(n)
				b.ResetTimer()
				for i := range b.N {
					if _, err := s.Add(ctx, benchName(uint64(n+i)), 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(perName, "B/name")
			})
		}
	}
}
