package window_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/memcap/memcaptest"
	"github.com/vkcounter/vkcounter/counters/window"
)

// TestMemoryCap floods a memory store with new counters, and one counter
// with hits in new seconds: past its cap they are refused with
// ErrNoMemory, the counters it holds keep counting, and the heap it takes
// is what it estimates.
func TestMemoryCap(t *testing.T) {
	const w = 60 * time.Second
	api := func(i int) string { return fmt.Sprintf("api:%d", i) }
	tests := []struct {
		name      string
		lim       window.MemoryLimits
		nameOf    func(i int) string
		windowOf  func(i int) time.Duration
		tick      bool // hit i is at second t0+i, else all at t0
		wantCalls int  // 0: the bytes cap stops the flood
		large     bool
	}{
		{"max names", window.MemoryLimits{MaxNames: 10_000}, api, func(int) time.Duration { return w }, false, 10_000, false},
		{"max bytes, new names", window.MemoryLimits{MaxBytes: 8 << 20}, api, func(int) time.Duration { return w }, false, 0, false},
		{"max bytes, new windows", window.MemoryLimits{MaxBytes: 8 << 20}, func(int) string { return "api" },
			func(i int) time.Duration { return time.Duration(i+1) * time.Second }, false, 0, false},
		// Runs of 16 bytes in an array that doubles: at most 4 MiB of
		// them fit in 8 MiB beside the array they are copied from.
		{"max bytes, new seconds", window.MemoryLimits{MaxBytes: 8 << 20}, func(int) string { return "api" },
			func(int) time.Duration { return window.MaxWindow }, true, 4 << 20 / 16, false},
		{"1M names", window.MemoryLimits{MaxNames: 1_000_000}, api, func(int) time.Duration { return w }, false, 1_000_000, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.large {
				memcaptest.SkipLarge(t)
			}
			ctx := context.Background()
			c := newClock(t0)
			m := window.NewMemory(c.Now, tc.lim)
			at := func(i int) {
				if tc.tick {
					c.Set(t0 + int64(i))
				}
			}
			n := memcaptest.Flood(t, m, tc.lim, window.ErrNoMemory, 2_000_000, func(i int) error {
				at(i)
				_, err := m.Hit(ctx, tc.nameOf(i), tc.windowOf(i))
				return err
			})
			if tc.wantCalls != 0 && n != tc.wantCalls {
				t.Errorf("%d hits succeeded; want %d", n, tc.wantCalls)
			}
			if tc.tick {
				// Every run is held; once they leave the window, the
				// counter takes hits again.
				count(t, m, "api", window.MaxWindow, int64(n))
				c.Set(t0 + int64(n) + int64(window.MaxWindow/time.Second))
				hit(t, m, "api", window.MaxWindow, 0)
				return
			}
			// A refused counter was not created; the others keep counting.
			count(t, m, tc.nameOf(n), tc.windowOf(n), 0)
			for _, i := range []int{0, n / 2, n - 1} {
				hit(t, m, tc.nameOf(i), tc.windowOf(i), 1)
			}
			if tc.large {
				return
			}
			// Once their window has passed, the counters are dropped, a few
			// per call, and new ones fit again.
			c.Set(t0 + int64(tc.windowOf(n-1)/time.Second))
			for i := range n / 2 {
				hit(t, m, "later:"+tc.nameOf(i), tc.windowOf(i), 0)
			}
		})
	}
}
