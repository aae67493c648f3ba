package window_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

// A clock is a settable test clock in whole seconds.
type clock struct{ sec atomic.Int64 }

func newClock(sec int64) *clock {
	c := &clock{}
	c.sec.Store(sec)
	return c
}

func (c *clock) Now() time.Time { return time.Unix(c.sec.Load(), 0) }
func (c *clock) Set(sec int64)  { c.sec.Store(sec) }

const t0 = 1764115200

// forEachStore runs body once per store: memory, and Redis on every
// backend redistest offers, each reading the time from now.
func forEachStore(t *testing.T, body func(t *testing.T, open func(now func() time.Time) window.Store)) {
	t.Run("memory", func(t *testing.T) {
		body(t, func(now func() time.Time) window.Store { return window.NewMemory(now, window.MemoryLimits{}) })
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			body(t, func(now func() time.Time) window.Store {
				r, err := window.NewRedis(tg.Client, redistest.Prefix(t))
				if err != nil {
					t.Fatal(err)
				}
				return r.WithClock(now)
			})
		})
	})
}

func hit(t testing.TB, s window.Store, name string, w time.Duration, want int64) {
	t.Helper()
	n, err := s.Hit(context.Background(), name, w)
	if err != nil || n != want {
		t.Fatalf("Hit(%q, %v) = %d, %v; want %d", name, w, n, err, want)
	}
}

func count(t testing.TB, s window.Store, name string, w time.Duration, want int64) {
	t.Helper()
	n, err := s.Count(context.Background(), name, w)
	if err != nil || n != want {
		t.Fatalf("Count(%q, %v) = %d, %v; want %d", name, w, n, err, want)
	}
}

// TestBoundary is freq's boundary rule: a hit at t is outside the window
// once t <= now - W, and inside while t > now - W.
func TestBoundary(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(func() time.Time) window.Store) {
		c := newClock(t0)
		s := open(c.Now)
		const w = 10 * time.Second
		hit(t, s, "api", w, 0)
		hit(t, s, "api", w, 1) // same second: one run, two hits
		c.Set(t0 + 5)
		hit(t, s, "api", w, 2)
		c.Set(t0 + 9) // t0 > now - W: still inside
		count(t, s, "api", w, 3)
		c.Set(t0 + 10) // t0 <= now - W: the first two expired
		count(t, s, "api", w, 1)
		hit(t, s, "api", w, 1)
		c.Set(t0 + 15) // t0+5 expired too
		count(t, s, "api", w, 1)
		c.Set(t0 + 20) // all expired
		count(t, s, "api", w, 0)
		hit(t, s, "api", w, 0)
		// Another window on the same name is another counter.
		count(t, s, "api", 60*time.Second, 0)
		hit(t, s, "api", 60*time.Second, 0)
		count(t, s, "api", w, 1)
		count(t, s, "never", w, 0)
	})
}

// TestClockBehind counts a hit read from a clock behind the newest hit at
// the newest hit's second, as freq does.
func TestClockBehind(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(func() time.Time) window.Store) {
		c := newClock(t0 + 100)
		s := open(c.Now)
		hit(t, s, "x", 10*time.Second, 0)
		c.Set(t0)
		hit(t, s, "x", 10*time.Second, 1)
		c.Set(t0 + 109)
		count(t, s, "x", 10*time.Second, 2)
		c.Set(t0 + 110)
		count(t, s, "x", 10*time.Second, 0)
	})
}

// TestConcurrentHits: 200 concurrent hits get exactly {0…199}.
func TestConcurrentHits(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(func() time.Time) window.Store) {
		s := open(newClock(t0).Now)
		got := together.Run(t, 200, func(int) (int64, error) {
			return s.Hit(context.Background(), "hot", time.Hour)
		})
		slices.Sort(got)
		for i, n := range got {
			if n != int64(i) {
				t.Fatalf("sorted answers[%d] = %d; want 0…199 each once: %v", i, n, got)
			}
		}
		count(t, s, "hot", time.Hour, 200)
	})
}

// TestInvalid: bad names and windows are refused and change nothing.
func TestInvalid(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(func() time.Time) window.Store) {
		s := open(newClock(t0).Now)
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			w    time.Duration
			want error
		}{
			{"", time.Second, window.ErrInvalidName},
			{strings.Repeat("n", window.MaxNameLen+1), time.Second, window.ErrInvalidName},
			{"a", 0, window.ErrInvalidWindow},
			{"a", -time.Second, window.ErrInvalidWindow},
			{"a", 1500 * time.Millisecond, window.ErrInvalidWindow},
			{"a", window.MaxWindow + time.Second, window.ErrInvalidWindow},
		} {
			if _, err := s.Hit(ctx, tc.name, tc.w); !errors.Is(err, tc.want) {
				t.Errorf("Hit(%.10q, %v) = %v; want %v", tc.name, tc.w, err, tc.want)
			}
			if _, err := s.Count(ctx, tc.name, tc.w); !errors.Is(err, tc.want) {
				t.Errorf("Count(%.10q, %v) = %v; want %v", tc.name, tc.w, err, tc.want)
			}
		}
		hit(t, s, strings.Repeat("n", window.MaxNameLen), window.MaxWindow, 0)
		count(t, s, "a", time.Second, 0)
	})
}

// TestMemoryBounded: a hot counter costs one entry per distinct second,
// at most its window's seconds, and quiet counters are dropped.
func TestMemoryBounded(t *testing.T) {
	c := newClock(t0)
	m := window.NewMemory(c.Now, window.MemoryLimits{})
	const w = 100 * time.Second
	for sec := int64(0); sec < 1000; sec++ {
		c.Set(t0 + sec)
		for range 50 {
			if _, err := m.Hit(context.Background(), "hot", w); err != nil {
				t.Fatal(err)
			}
		}
		if n := m.Entries("hot", w); n > 100 {
			t.Fatalf("at second %d the counter holds %d entries; want at most 100", sec, n)
		}
	}
	count(t, m, "hot", w, 100*50)
	for i := range 1000 {
		hit(t, m, "quiet"+strconv.Itoa(i), time.Second, 0)
	}
	c.Set(t0 + 5000)
	for i := range 2000 {
		hit(t, m, "late", 10*time.Second, int64(i))
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("%d counters held after the others' windows passed; want only the live one left", n)
	}
}
