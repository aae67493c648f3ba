package unique_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vkcounter/vkcounter/counters/memcap/memcaptest"
	"github.com/vkcounter/vkcounter/counters/unique"
)

// TestMemoryCap floods a memory store with new names, and names with new
// keys: past its cap they are refused with ErrNoMemory, the names it
// holds keep counting, and the heap it takes is what it estimates.
func TestMemoryCap(t *testing.T) {
	one := func(i int) (string, []string) { return fmt.Sprintf("visitors:%d", i), []string{"u1"} }
	// 20 adds of 100 keys per name: each name turns dense (16 KiB).
	dense := func(i int) (string, []string) {
		keys := make([]string, 100)
		for j := range keys {
			keys[j] = fmt.Sprintf("user:%d", i*100+j)
		}
		return fmt.Sprintf("visitors:%d", i/20), keys
	}
	tests := []struct {
		name      string
		lim       unique.MemoryLimits
		add       func(i int) (name string, keys []string)
		wantCalls int // 0: the bytes cap stops the flood
		large     bool
	}{
		{"max names", unique.MemoryLimits{MaxNames: 10_000}, one, 10_000, false},
		{"max bytes, new names", unique.MemoryLimits{MaxBytes: 8 << 20}, one, 0, false},
		{"max bytes, new keys", unique.MemoryLimits{MaxBytes: 8 << 20}, dense, 0, false},
		{"1M names", unique.MemoryLimits{MaxNames: 1_000_000}, one, 1_000_000, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.large {
				memcaptest.SkipLarge(t)
			}
			ctx := context.Background()
			m := unique.NewMemory(tc.lim)
			n := memcaptest.Flood(t, m, tc.lim, unique.ErrNoMemory, 2_000_000, func(i int) error {
				name, keys := tc.add(i)
				_, err := m.Add(ctx, name, keys)
				return err
			})
			if tc.wantCalls != 0 && n != tc.wantCalls {
				t.Errorf("%d adds succeeded; want %d", n, tc.wantCalls)
			}
			// The names held keep counting, and take keys already added.
			for _, i := range []int{0, n / 2, n - 1} {
				name, keys := tc.add(i)
				if _, err := m.Count(ctx, name); err != nil {
					t.Errorf("Count(%q): %v", name, err)
				}
				if changed, err := m.Add(ctx, name, keys); err != nil || changed {
					t.Errorf("Add(%q) of keys it holds = %v, %v; want unchanged", name, changed, err)
				}
			}
			if name, _ := tc.add(n); name != "visitors:0" {
				if _, err := m.Count(ctx, name); !errors.Is(err, unique.ErrNotFound) && tc.wantCalls != 0 {
					t.Errorf("Count of the refused name: %v; want ErrNotFound", err)
				}
			}
		})
	}
}
