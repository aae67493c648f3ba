// Package memcaptest floods a capped memory store in tests and checks
// that the cap held: the flood ends refused with the kind's ErrNoMemory,
// the store's estimate stays within its limits, and the Go heap the store
// really took is within 25 % of its estimate.
package memcaptest

import (
	"errors"
	"runtime"
	"testing"

	"github.com/vkcounter/vkcounter/counters/memcap"
)

// A Store is a capped memory store: every kind's Memory.
type Store interface {
	// Usage returns the names held and their estimated bytes.
	Usage() (names int, bytes int64)
}

// HeapAlloc returns the bytes of the live heap objects after a full
// collection.
func HeapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Flood calls grow(0), grow(1), … on s, whose limits are lim, until one
// fails, at most limit times, and returns how many succeeded. The test
// fails unless the call that stopped the flood failed with an error
// wrapping noMem (the kind's ErrNoMemory), s's names and estimated bytes
// are within lim, and the Go heap the flood took (measured after a
// collection, so only what s keeps counts) is within 25 % of what s's
// estimate grew by.
func Flood(t testing.TB, s Store, lim memcap.Limits, noMem error, limit int, grow func(i int) error) int {
	t.Helper()
	_, bytes0 := s.Usage()
	heap0 := HeapAlloc()
	var err error
	n := 0
	for ; n < limit; n++ {
		if err = grow(n); err != nil {
			break
		}
	}
	heap := HeapAlloc() - heap0
	names, bytes := s.Usage()
	if !errors.Is(err, noMem) {
		t.Fatalf("after %d calls the flood stopped with %v; want the store's ErrNoMemory (%v) within %d calls", n, err, noMem, limit)
	}
	t.Logf("%d calls succeeded, then: %v", n, err)
	maxNames, maxBytes := lim.MaxNames, lim.MaxBytes
	if maxNames == 0 {
		maxNames = memcap.DefaultMaxNames
	}
	if maxBytes == 0 {
		maxBytes = memcap.DefaultMaxBytes
	}
	if names > maxNames || bytes > maxBytes {
		t.Errorf("the store holds %d names of an estimated %d bytes; want at most %d and %d", names, bytes, maxNames, maxBytes)
	}
	grew := bytes - bytes0
	t.Logf("heap %d bytes, estimate %d bytes (%.2f), cap %d bytes", heap, grew, float64(heap)/float64(grew), maxBytes)
	if heap < grew*3/4 || heap > grew*5/4 {
		t.Errorf("the flood took %d bytes of heap, %.2f times the %d bytes the store estimated; want within 25 %%", heap, float64(heap)/float64(grew), grew)
	}
	return n
}

// SkipLarge skips a test of a million names or more under -short and
// under the race detector, which makes it take minutes; run it with
// go test -run 'TestMemoryCap/1M' ./counters/... (no -race).
func SkipLarge(t testing.TB) {
	t.Helper()
	if testing.Short() || race {
		t.Skip("a million names: not with -short or -race")
	}
}
