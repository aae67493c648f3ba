package memcap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/memcap"
)

var errNoMem = errors.New("test: out of memory")

func TestAlloc(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{0, 0}, {1, 8}, {8, 8}, {9, 16}, {17, 24}, {25, 32}, {33, 48}, {255, 256}, {257, 288},
		{16384, 16384}, {32769, 40960},
	} {
		if got := memcap.Alloc(tc.n); got != tc.want {
			t.Errorf("Alloc(%d) = %d; want %d", tc.n, got, tc.want)
		}
	}
}

func TestBudget(t *testing.T) {
	b := memcap.NewBudget(memcap.Limits{MaxNames: 2, MaxBytes: 800}, errNoMem)
	if err := b.Admit(701); !errors.Is(err, errNoMem) || !strings.Contains(err.Error(), "max bytes") {
		t.Fatalf("Admit past 7/8 of the bytes: %v; want a refusal naming max bytes", err)
	}
	if err := b.Admit(700); err != nil {
		t.Fatalf("Admit up to 7/8 of the bytes: %v", err)
	}
	b.Add(1, 700)
	if err := b.Fits(100); err != nil {
		t.Fatalf("Fits up to the whole cap: %v", err)
	}
	if err := b.Fits(101); !errors.Is(err, errNoMem) {
		t.Fatalf("Fits past the cap: %v; want a refusal", err)
	}
	b.Add(0, -700)
	b.Add(1, 10)
	if err := b.Admit(1); !errors.Is(err, errNoMem) || !strings.Contains(err.Error(), "max names") {
		t.Fatalf("Admit past the names: %v; want a refusal naming max names", err)
	}
	if b.Names() != 2 || b.Bytes() != 10 {
		t.Fatalf("Names, Bytes = %d, %d; want 2, 10", b.Names(), b.Bytes())
	}
	if lim := memcap.NewBudget(memcap.Limits{}, errNoMem).Limits(); lim.MaxNames != memcap.DefaultMaxNames || lim.MaxBytes != memcap.DefaultMaxBytes {
		t.Fatalf("zero limits = %+v; want the defaults", lim)
	}
}
