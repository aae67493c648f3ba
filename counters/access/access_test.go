package access_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// opener opens a fresh, empty store of one kind.
type opener func(t *testing.T) access.Store

// forEachStore runs body once per store kind: memory, file, and Redis on
// every backend redistest offers.
func forEachStore(t *testing.T, body func(t *testing.T, open opener)) {
	t.Run("memory", func(t *testing.T) {
		body(t, func(t *testing.T) access.Store { return access.NewMemory() })
	})
	t.Run("file", func(t *testing.T) {
		body(t, func(t *testing.T) access.Store { return newFile(t, t.TempDir(), 0) })
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			body(t, func(t *testing.T) access.Store { return access.NewRedis(tg.Client, cleanPrefix(t, tg)) })
		})
	})
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
	n, err := s.Hit(context.Background(), name)
	if err != nil {
		t.Fatalf("Hit(%q): %v", name, err)
	}
	return n
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
			if n, err := s.Hit(context.Background(), name); !errors.Is(err, access.ErrInvalidName) {
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
		if n, err := s.Hit(ctx, "page"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Hit = %d, %v; want context.Canceled", n, err)
		}
		wantNotFound(t, s, "page")
	}},
	{"1000 concurrent hits return 1 to 1000 once each", func(t *testing.T, s access.Store) {
		const n = 1000
		got := make([]int64, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				got[i], errs[i] = s.Hit(context.Background(), "hot")
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		checkExactlyOnce(t, got, n)
		if tot := total(t, s, "hot"); tot != n {
			t.Fatalf("Total = %d, want %d", tot, n)
		}
	}},
}

func TestConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		for _, c := range conformance {
			t.Run(c.name, func(t *testing.T) { c.body(t, open(t)) })
		}
	})
}

// checkExactlyOnce checks that totals holds each of 1..n exactly once.
func checkExactlyOnce(t *testing.T, totals []int64, n int) {
	t.Helper()
	seen := make([]int, n+1)
	for _, v := range totals {
		if v < 1 || v > int64(n) {
			t.Fatalf("total %d out of range 1..%d", v, n)
		}
		seen[v]++
	}
	var bad []string
	for v := 1; v <= n; v++ {
		if seen[v] != 1 {
			bad = append(bad, fmt.Sprintf("%d returned %d times", v, seen[v]))
		}
	}
	if len(bad) > 0 || len(totals) != n {
		t.Fatalf("%d totals, want %d; %s", len(totals), n, strings.Join(bad, ", "))
	}
}
