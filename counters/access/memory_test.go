package access_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap/memcaptest"
)

// TestMemoryCap floods a memory store with new names: past its cap they
// are refused with ErrNoMemory, the names it holds keep counting and
// listing, and the heap it takes is what it estimates.
func TestMemoryCap(t *testing.T) {
	long := strings.Repeat("n", access.MaxNameLen-8)
	tests := []struct {
		name      string
		lim       access.MemoryLimits
		nameOf    func(i int) string
		wantNames int // 0: the bytes cap stops the flood
		large     bool
	}{
		{"max names", access.MemoryLimits{MaxNames: 10_000}, shortName, 10_000, false},
		{"max bytes, short names", access.MemoryLimits{MaxBytes: 8 << 20}, shortName, 0, false},
		{"max bytes, long names", access.MemoryLimits{MaxBytes: 8 << 20}, func(i int) string { return fmt.Sprintf("%s%08d", long, i) }, 0, false},
		{"1M names", access.MemoryLimits{MaxNames: 1_000_000}, shortName, 1_000_000, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.large {
				memcaptest.SkipLarge(t)
			}
			ctx := context.Background()
			m := access.NewMemory(tc.lim)
			n := memcaptest.Flood(t, m, tc.lim, access.ErrNoMemory, 2_000_000, func(i int) error {
				_, err := access.Hit(ctx, m, tc.nameOf(i))
				return err
			})
			if tc.wantNames != 0 && n != tc.wantNames {
				t.Errorf("%d names created; want %d", n, tc.wantNames)
			}
			// A refused name was not created; the others keep counting.
			if _, err := m.Total(ctx, tc.nameOf(n)); !errors.Is(err, access.ErrNotFound) {
				t.Errorf("Total of the refused name: %v; want ErrNotFound", err)
			}
			for _, i := range []int{0, n / 2, n - 1} {
				if total, err := m.Add(ctx, tc.nameOf(i), 2); err != nil || total != 3 {
					t.Errorf("Add to the existing %.20q = %d, %v; want 3", tc.nameOf(i), total, err)
				}
			}
			if tc.large {
				return
			}
			names, _ := listAll(t, m, "", access.MaxListLimit)
			if len(names) != n {
				t.Errorf("%d names listed; want the %d created", len(names), n)
			}
		})
	}
}

func shortName(i int) string { return fmt.Sprintf("page:%d", i) }
