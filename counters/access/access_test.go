package access_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

// opener opens a fresh, empty store of one kind.
type opener func(t *testing.T) access.Store

// forEachStore runs body once per store kind: memory, file, and Redis on
// every backend redistest offers.
func forEachStore(t *testing.T, body func(t *testing.T, open opener)) {
	t.Run("memory", func(t *testing.T) {
		body(t, func(t *testing.T) access.Store { return access.NewMemory(access.MemoryLimits{}) })
	})
	t.Run("file", func(t *testing.T) {
		body(t, func(t *testing.T) access.Store { return newFile(t, t.TempDir(), 0) })
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			body(t, func(t *testing.T) access.Store { return newRedis(t, tg.Client, cleanPrefix(t, tg)) })
		})
	})
}

// newRedis returns a Redis store on rdb under prefix.
func newRedis(tb testing.TB, rdb redis.UniversalClient, prefix string) *access.Redis {
	tb.Helper()
	s, err := access.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// cleanPrefix returns a fresh key prefix whose keys are deleted when t ends.
func cleanPrefix(t testing.TB, tg *redistest.Target) string {
	t.Helper()
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		for _, k := range redistest.Keys(t, tg.Client, prefix) {
			tg.Client.Del(context.Background(), k) // one key per call: cluster-safe
		}
	})
	return prefix
}

func newFile(t testing.TB, dir string, levels int) *access.File {
	t.Helper()
	f, err := access.NewFile(dir, levels)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func hit(t testing.TB, s access.Store, name string) int64 {
	t.Helper()
	n, err := access.Hit(context.Background(), s, name)
	if err != nil {
		t.Fatalf("Hit(%q): %v", name, err)
	}
	return n
}

func add(t testing.TB, s access.Store, name string, n int64) int64 {
	t.Helper()
	got, err := s.Add(context.Background(), name, n)
	if err != nil {
		t.Fatalf("Add(%q, %d): %v", name, n, err)
	}
	return got
}

func total(t testing.TB, s access.Store, name string) int64 {
	t.Helper()
	n, err := s.Total(context.Background(), name)
	if err != nil {
		t.Fatalf("Total(%q): %v", name, err)
	}
	return n
}

func wantNotFound(t testing.TB, s access.Store, name string) {
	t.Helper()
	if n, err := s.Total(context.Background(), name); !errors.Is(err, access.ErrNotFound) {
		t.Fatalf("Total(%q) = %d, %v; want ErrNotFound", name, n, err)
	}
}

// conformance lists the behaviour every Store must show.
var conformance = []struct {
	name string
	body func(t *testing.T, s access.Store)
}{
	{"first hit is 1 and totals follow", func(t *testing.T, s access.Store) {
		wantNotFound(t, s, "page")
		for want := int64(1); want <= 3; want++ {
			if got := hit(t, s, "page"); got != want {
				t.Fatalf("Hit = %d, want %d", got, want)
			}
		}
		if got := total(t, s, "page"); got != 3 {
			t.Fatalf("Total = %d, want 3", got)
		}
	}},
	{"names are independent byte strings", func(t *testing.T, s access.Store) {
		names := []string{
			"a", "A", "%41", access.DefaultName, "names", "vk.messages", "a/b", "a%2Fb",
			".", "..", ".hidden", "x}{y", "{", "\x00\xff", "count0.dat", "count.lock",
			strings.Repeat("z", access.MaxNameLen),
			strings.Repeat("/", access.MaxNameLen),
			strings.Repeat("/", access.MaxNameLen-1) + "a",
		}
		for i, name := range names {
			for range i + 1 {
				hit(t, s, name)
			}
		}
		for i, name := range names {
			if got := total(t, s, name); got != int64(i+1) {
				t.Errorf("Total(%q) = %d, want %d", name, got, i+1)
			}
		}
	}},
	{"invalid names are refused and change nothing", func(t *testing.T, s access.Store) {
		long := strings.Repeat("n", access.MaxNameLen+1)
		for _, name := range []string{"", long} {
			if n, err := access.Hit(context.Background(), s, name); !errors.Is(err, access.ErrInvalidName) {
				t.Errorf("Hit(len %d) = %d, %v; want ErrInvalidName", len(name), n, err)
			}
			if n, err := s.Total(context.Background(), name); !errors.Is(err, access.ErrInvalidName) {
				t.Errorf("Total(len %d) = %d, %v; want ErrInvalidName", len(name), n, err)
			}
		}
		wantNotFound(t, s, long[:access.MaxNameLen])
		wantNotFound(t, s, access.DefaultName)
	}},
	{"cancelled context changes nothing", func(t *testing.T, s access.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if n, err := access.Hit(ctx, s, "page"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Hit = %d, %v; want context.Canceled", n, err)
		}
		if n, err := s.Add(ctx, "page", 5); !errors.Is(err, context.Canceled) {
			t.Fatalf("Add = %d, %v; want context.Canceled", n, err)
		}
		wantNotFound(t, s, "page")
	}},
	{"add returns the running total", func(t *testing.T, s access.Store) {
		wantNotFound(t, s, "page")
		var want int64
		for _, n := range []int64{3, 1, 10, 1000} {
			want += n
			if got := add(t, s, "page", n); got != want {
				t.Fatalf("Add(%d) = %d, want %d", n, got, want)
			}
		}
		if got := total(t, s, "page"); got != want {
			t.Fatalf("Total = %d, want %d", got, want)
		}
		wantNotFound(t, s, "other")
	}},
	{"add and hit count on one total", func(t *testing.T, s access.Store) {
		if got := add(t, s, "page", 5); got != 5 {
			t.Fatalf("Add(5) = %d, want 5", got)
		}
		if got := hit(t, s, "page"); got != 6 {
			t.Fatalf("Hit after Add(5) = %d, want 6", got)
		}
		if got := add(t, s, "page", 4); got != 10 {
			t.Fatalf("Add(4) after Hit = %d, want 10", got)
		}
		if got := total(t, s, "page"); got != 10 {
			t.Fatalf("Total = %d, want 10", got)
		}
	}},
	{"add below 1 is refused and changes nothing", func(t *testing.T, s access.Store) {
		bad := []int64{0, -1, math.MinInt64}
		for _, n := range bad {
			if got, err := s.Add(context.Background(), "page", n); !errors.Is(err, access.ErrInvalidDelta) {
				t.Fatalf("Add(%d) on a new counter = %d, %v; want ErrInvalidDelta", n, got, err)
			}
		}
		wantNotFound(t, s, "page")
		add(t, s, "page", 7)
		for _, n := range bad {
			if got, err := s.Add(context.Background(), "page", n); !errors.Is(err, access.ErrInvalidDelta) {
				t.Fatalf("Add(%d) = %d, %v; want ErrInvalidDelta", n, got, err)
			}
		}
		if got := total(t, s, "page"); got != 7 {
			t.Fatalf("Total = %d, want 7", got)
		}
	}},
	{"overflow is refused and changes nothing", func(t *testing.T, s access.Store) {
		const top = math.MaxInt64
		wantOverflow := func(op string, n int64, err error) {
			t.Helper()
			if !errors.Is(err, access.ErrOverflow) {
				t.Fatalf("%s = %d, %v; want ErrOverflow", op, n, err)
			}
		}
		if got := add(t, s, "page", top-2); got != top-2 {
			t.Fatalf("Add(MaxInt64-2) = %d", got)
		}
		n, err := s.Add(context.Background(), "page", 3)
		wantOverflow("Add(3) at MaxInt64-2", n, err)
		n, err = s.Add(context.Background(), "page", top)
		wantOverflow("Add(MaxInt64) at MaxInt64-2", n, err)
		if got := total(t, s, "page"); got != top-2 {
			t.Fatalf("Total after refused Adds = %d, want MaxInt64-2", got)
		}
		if got := add(t, s, "page", 2); got != top {
			t.Fatalf("Add(2) = %d, want MaxInt64", got)
		}
		n, err = access.Hit(context.Background(), s, "page")
		wantOverflow("Hit at MaxInt64", n, err)
		n, err = s.Add(context.Background(), "page", 1)
		wantOverflow("Add(1) at MaxInt64", n, err)
		if got := total(t, s, "page"); got != top {
			t.Fatalf("Total after refused Hit = %d, want MaxInt64", got)
		}
	}},
	{"1000 concurrent hits return 1 to 1000 once each", func(t *testing.T, s access.Store) {
		const n = 1000
		checkExactlyOnce(t, concurrently(t, n, func(ctx context.Context) (int64, error) {
			return access.Hit(ctx, s, "hot")
		}), n, 1)
		if tot := total(t, s, "hot"); tot != n {
			t.Fatalf("Total = %d, want %d", tot, n)
		}
	}},
	{"200 concurrent adds of 5 return 5 to 1000 once each", func(t *testing.T, s access.Store) {
		const n, step = 200, 5
		checkExactlyOnce(t, concurrently(t, n, func(ctx context.Context) (int64, error) {
			return s.Add(ctx, "hot", step)
		}), n, step)
		if tot := total(t, s, "hot"); tot != n*step {
			t.Fatalf("Total = %d, want %d", tot, n*step)
		}
	}},
}

// concurrently runs op in n goroutines released at once and returns what
// each returned; it fails t if any op failed.
func concurrently(t *testing.T, n int, op func(ctx context.Context) (int64, error)) []int64 {
	t.Helper()
	return together.Run(t, n, func(int) (int64, error) { return op(context.Background()) })
}

func TestConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		for _, c := range conformance {
			t.Run(c.name, func(t *testing.T) { c.body(t, open(t)) })
		}
	})
}

// checkExactlyOnce checks that totals holds each of step, 2·step, …,
// n·step exactly once.
func checkExactlyOnce(t *testing.T, totals []int64, n int, step int64) {
	t.Helper()
	seen := make([]int, n+1)
	for _, v := range totals {
		if v < step || v > int64(n)*step || v%step != 0 {
			t.Fatalf("total %d is not a multiple of %d in %d..%d", v, step, step, int64(n)*step)
		}
		seen[v/step]++
	}
	var bad []string
	for i := 1; i <= n; i++ {
		if seen[i] != 1 {
			bad = append(bad, fmt.Sprintf("%d returned %d times", int64(i)*step, seen[i]))
		}
	}
	if len(bad) > 0 || len(totals) != n {
		t.Fatalf("%d totals, want %d; %s", len(totals), n, strings.Join(bad, ", "))
	}
}
