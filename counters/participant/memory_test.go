package participant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/memcap/memcaptest"
	"github.com/vkcounter/vkcounter/counters/participant"
)

// TestMemoryCap floods a memory store with new names, and one name with
// new keys: past its cap they are refused with ErrNoMemory, the names and
// keys it holds keep working, and the heap it takes is what it estimates.
func TestMemoryCap(t *testing.T) {
	const sec = 1762615624
	room := func(i int) string { return fmt.Sprintf("room:%d", i) }
	user := func(i int) string { return fmt.Sprintf("user:%d", i) }
	tests := []struct {
		name      string
		lim       participant.MemoryLimits
		nameOf    func(i int) string // the name of visit i
		keyOf     func(i int) string // its key
		wantCalls int                // 0: the bytes cap stops the flood
		large     bool
	}{
		{"max names", participant.MemoryLimits{MaxNames: 10_000}, room, user, 10_000, false},
		{"max bytes, new names", participant.MemoryLimits{MaxBytes: 8 << 20}, room, user, 0, false},
		{"max bytes, new keys", participant.MemoryLimits{MaxBytes: 8 << 20}, func(int) string { return "room" }, user, 0, false},
		{"1M names", participant.MemoryLimits{MaxNames: 1_000_000}, room, user, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.large {
				memcaptest.SkipLarge(t)
			}
			ctx := context.Background()
			c := newClock(sec)
			m := participant.NewMemory(c.Now, tc.lim)
			n := memcaptest.Flood(t, m, tc.lim, participant.ErrNoMemory, 2_000_000, func(i int) error {
				_, _, err := participant.Visit(ctx, m, tc.nameOf(i), tc.keyOf(i), 0)
				return err
			})
			if tc.wantCalls != 0 && n != tc.wantCalls {
				t.Errorf("%d visits succeeded; want %d", n, tc.wantCalls)
			}
			// A refused visit changed nothing; the keys held keep visiting.
			want := 0 // a name refused
			if tc.nameOf(n) == tc.nameOf(0) {
				want = n // a key refused in the one name
			}
			if got, err := m.Active(ctx, tc.nameOf(n), 0); err != nil || got != want {
				t.Errorf("Active of the refused visit's name = %d, %v; want %d", got, err, want)
			}
			for _, i := range []int{0, n / 2, n - 1} {
				if _, isNew, err := participant.Visit(ctx, m, tc.nameOf(i), tc.keyOf(i), 0); err != nil || isNew {
					t.Errorf("Visit of the held %q, %q = new %v, %v; want not new", tc.nameOf(i), tc.keyOf(i), isNew, err)
				}
			}
			if _, removed, err := m.Leave(ctx, tc.nameOf(0), tc.keyOf(0)); err != nil || !removed {
				t.Errorf("Leave of a held key = %v, %v; want removed", removed, err)
			}
			if tc.large {
				return
			}
			// Once their timeout has passed, the names are dropped, a few
			// per call, and new ones fit again.
			c.Set(sec + int64(participant.DefaultTimeout/time.Second) + 1)
			for i := range n / 2 {
				if _, _, err := participant.Visit(ctx, m, "later:"+tc.nameOf(i), tc.keyOf(i), 0); err != nil {
					t.Fatalf("visit %d after the others expired: %v", i, err)
				}
			}
		})
	}
}

// TestMemoryDropsExpiredNamesForRoom: at its cap, the store makes room
// for a new name by dropping names no key is active in any more (the
// longest timeout of their visits has passed), and their bytes with them;
// until then a new name is refused.
func TestMemoryDropsExpiredNamesForRoom(t *testing.T) {
	ctx := context.Background()
	c := newClock(1000)
	m := participant.NewMemory(c.Now, participant.MemoryLimits{MaxNames: 100})
	visit := func(name, key string, timeout time.Duration) error {
		_, _, err := participant.Visit(ctx, m, name, key, timeout)
		return err
	}
	for i := range 100 {
		timeout := 10 * time.Second
		if i == 0 {
			timeout = 20 * time.Second // the longest timeout of quiet0
			if err := visit("quiet0", "other", 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := visit(fmt.Sprint("quiet", i), "k", timeout); err != nil {
			t.Fatal(err)
		}
	}
	_, full := m.Usage()
	c.Set(1000 + 10) // the last second their keys are active
	if err := visit("new", "k", 0); !errors.Is(err, participant.ErrNoMemory) {
		t.Fatalf("a new name while every name is active: %v; want ErrNoMemory", err)
	}
	c.Set(1000 + 11)
	for i := range 99 {
		if err := visit(fmt.Sprint("new", i), "k", 0); err != nil {
			t.Fatalf("new name %d once 99 names expired: %v", i, err)
		}
	}
	if err := visit("new99", "k", 0); !errors.Is(err, participant.ErrNoMemory) {
		t.Fatalf("a new name while quiet0 is active for its longest timeout: %v; want ErrNoMemory", err)
	}
	if got, err := m.Active(ctx, "quiet0", 20*time.Second); err != nil || got != 2 {
		t.Fatalf("Active of quiet0 = %d, %v; want its 2 keys", got, err)
	}
	if got, err := m.Active(ctx, "quiet1", time.Hour); err != nil || got != 0 {
		t.Fatalf("Active of a dropped name = %d, %v; want 0", got, err)
	}
	if names, bytes := m.Usage(); names != 100 || bytes > full {
		t.Fatalf("the store holds %d names of %d bytes; want 100 of at most the %d bytes it held", names, bytes, full)
	}
	for i := range 99 {
		if _, _, err := m.Leave(ctx, fmt.Sprint("new", i), "k"); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k", "other"} {
		if _, _, err := m.Leave(ctx, "quiet0", k); err != nil {
			t.Fatal(err)
		}
	}
	if names, bytes := m.Usage(); names != 0 || bytes != 0 {
		t.Fatalf("after the last Leave the store holds %d names of %d bytes; want none", names, bytes)
	}
}

// TestMemoryActiveHoldsNoStoreLock stops an Active of a name with 100,000
// expired keys while it holds that name's set, and meanwhile runs every
// call on another name: they all return, so Active holds no lock of the
// whole store while it works (a store-wide lock would leave them waiting
// for ever: the test would time out). Then the stopped Active answers 0.
func TestMemoryActiveHoldsNoStoreLock(t *testing.T) {
	ctx := context.Background()
	c := newClock(1000)
	m := participant.NewMemory(c.Now, participant.MemoryLimits{MaxBytes: 1 << 30})
	keys := make([]string, participant.MaxBatch)
	for i := 0; i < 100_000; i += len(keys) {
		for j := range keys {
			keys[j] = fmt.Sprint(i + j)
		}
		if _, _, err := m.VisitMany(ctx, "stale", keys, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	c.Set(1100)
	inside, release := make(chan struct{}), make(chan struct{})
	participant.SetTestHookActive(func(name string) {
		if name == "stale" {
			close(inside)
			<-release
		}
	})
	defer participant.SetTestHookActive(nil)
	done := make(chan error, 1)
	go func() {
		n, err := m.Active(ctx, "stale", time.Second)
		if err == nil && n != 0 {
			err = fmt.Errorf("Active of the stale name = %d, want 0", n)
		}
		done <- err
	}()
	<-inside
	participant.SetTestHookActive(func(string) {}) // the Active stopped inside keeps waiting
	if _, isNew, err := participant.Visit(ctx, m, "other", "a", time.Minute); err != nil || !isNew {
		t.Fatalf("Visit of another name while Active works: %v, %v", isNew, err)
	}
	if n, err := m.Active(ctx, "other", time.Minute); err != nil || n != 1 {
		t.Fatalf("Active of another name while Active works: %d, %v", n, err)
	}
	if n, removed, err := m.Leave(ctx, "other", "a"); err != nil || !removed || n != 0 {
		t.Fatalf("Leave of another name while Active works: %d, %v, %v", n, removed, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
