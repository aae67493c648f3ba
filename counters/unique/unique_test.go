package unique_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// forEachStore runs body once per store: memory, and Redis on every
// backend redistest offers.
func forEachStore(t *testing.T, body func(t *testing.T, s unique.Store)) {
	t.Run("memory", func(t *testing.T) { body(t, unique.NewMemory(unique.MemoryLimits{})) })
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			s, err := unique.NewRedis(tg.Client, redistest.Prefix(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, k := range redistest.Keys(t, tg.Client, redistest.Prefix(t)) {
					tg.Client.Del(context.Background(), k)
				}
			})
			body(t, s)
		})
	})
}

// keys returns n keys "prefix0"… from first on.
func keys(prefix string, first, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = prefix + strconv.Itoa(first+i)
	}
	return ks
}

func add(t testing.TB, s unique.Store, name string, ks []string) bool {
	t.Helper()
	changed, err := s.Add(context.Background(), name, ks)
	if err != nil {
		t.Fatalf("Add(%q, %d keys): %v", name, len(ks), err)
	}
	return changed
}

func estimate(t testing.TB, s unique.Store, names ...string) int64 {
	t.Helper()
	n, err := s.Count(context.Background(), names...)
	if err != nil {
		t.Fatalf("Count(%q): %v", names, err)
	}
	return n
}

func within(t testing.TB, what string, got, want int64, pct float64) {
	t.Helper()
	if d := float64(got-want) / float64(want) * 100; d > pct || d < -pct {
		t.Fatalf("%s: estimate %d, want %d ± %.0f %% (off by %.2f %%)", what, got, want, pct, d)
	}
}

// TestMillion: 1,000,000 distinct keys estimate within 2 %; adding them
// all again changes nothing.
func TestMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 keys")
	}
	forEachStore(t, func(t *testing.T, s unique.Store) {
		for i := 0; i < 1_000_000; i += unique.MaxKeys {
			add(t, s, "visitors", keys("user:", i, unique.MaxKeys))
		}
		n := estimate(t, s, "visitors")
		within(t, "1,000,000 keys", n, 1_000_000, 2)
		for i := 0; i < 1_000_000; i += 50 * unique.MaxKeys {
			if add(t, s, "visitors", keys("user:", i, unique.MaxKeys)) {
				t.Fatalf("re-adding keys %d… changed the counter", i)
			}
		}
		if again := estimate(t, s, "visitors"); again != n {
			t.Fatalf("estimate after re-adding = %d, want %d", again, n)
		}
	})
}

// TestSmallAndUnion: small sets are near exact; a union counts keys shared
// by several names once; a name never added to is not found.
func TestSmallAndUnion(t *testing.T) {
	forEachStore(t, func(t *testing.T, s unique.Store) {
		if !add(t, s, "a", []string{"x", "y", "x"}) {
			t.Fatal("the first Add did not change the counter")
		}
		if add(t, s, "a", []string{"y", "x"}) {
			t.Fatal("re-adding x and y changed the counter")
		}
		if n := estimate(t, s, "a"); n != 2 {
			t.Fatalf("estimate of {x, y} = %d", n)
		}
		for i := 0; i < 30000; i += unique.MaxKeys {
			add(t, s, "day1", keys("u", i, unique.MaxKeys))
			add(t, s, "day2", keys("u", i+20000, unique.MaxKeys))
			add(t, s, "day3", keys("u", i+40000, unique.MaxKeys))
		}
		within(t, "day1", estimate(t, s, "day1"), 30000, 2)
		within(t, "day1 ∪ day2", estimate(t, s, "day1", "day2"), 50000, 2)
		within(t, "day1 ∪ day2 ∪ day3", estimate(t, s, "day1", "day2", "day3"), 70000, 2)
		within(t, "day1 ∪ never", estimate(t, s, "day1", "never"), 30000, 2)
		if _, err := s.Count(context.Background(), "never"); !errors.Is(err, unique.ErrNotFound) {
			t.Fatalf("Count(never) = %v, want ErrNotFound", err)
		}
		if _, err := s.Count(context.Background(), "never", "nor"); !errors.Is(err, unique.ErrNotFound) {
			t.Fatalf("Count(never, nor) = %v, want ErrNotFound", err)
		}
	})
}

func TestInvalid(t *testing.T) {
	forEachStore(t, func(t *testing.T, s unique.Store) {
		ctx := context.Background()
		long := strings.Repeat("n", 256)
		for _, tc := range []struct {
			what string
			err  error
			want error
		}{
			{"empty name", errOf(s.Add(ctx, "", []string{"k"})), unique.ErrInvalidName},
			{"long name", errOf(s.Add(ctx, long, []string{"k"})), unique.ErrInvalidName},
			{"no keys", errOf(s.Add(ctx, "n", nil)), unique.ErrInvalidCount},
			{"too many keys", errOf(s.Add(ctx, "n", keys("k", 0, unique.MaxKeys+1))), unique.ErrInvalidCount},
			{"empty key", errOf(s.Add(ctx, "n", []string{"k", ""})), unique.ErrInvalidKey},
			{"long key", errOf(s.Add(ctx, "n", []string{long})), unique.ErrInvalidKey},
			{"no names", errOf2(s.Count(ctx)), unique.ErrInvalidCount},
			{"too many names", errOf2(s.Count(ctx, keys("n", 0, unique.MaxNames+1)...)), unique.ErrInvalidCount},
			{"empty name in a union", errOf2(s.Count(ctx, "a", "")), unique.ErrInvalidName},
		} {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.want)
			}
		}
		if _, err := s.Count(ctx, "n"); !errors.Is(err, unique.ErrNotFound) {
			t.Fatalf("a refused Add created the counter: %v", err)
		}
	})
}

func errOf(_ bool, err error) error   { return err }
func errOf2(_ int64, err error) error { return err }

// TestMemoryMatchesRedis: the memory store answers what a real Redis
// answers for the same keys, Add by Add, and for unions.
func TestMemoryMatchesRedis(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		r, err := unique.NewRedis(tg.Client, redistest.Prefix(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, k := range redistest.Keys(t, tg.Client, redistest.Prefix(t)) {
				tg.Client.Del(context.Background(), k)
			}
		})
		m := unique.NewMemory(unique.MemoryLimits{})
		for i := 0; i < 60000; i += 500 {
			name := "n" + strconv.Itoa(i%3)
			ks := keys("k", i*3/2, 500)
			if a, b := add(t, m, name, ks), add(t, r, name, ks); a != b {
				t.Fatalf("Add %d: memory %v, redis %v", i, a, b)
			}
			if i%6000 == 0 {
				for _, names := range [][]string{{name}, {"n0", "n1", "n2"}} {
					if a, b := estimate(t, m, names...), estimate(t, r, names...); a != b {
						t.Fatalf("after %d keys, Count(%q): memory %d, redis %d", i+500, names, a, b)
					}
				}
			}
		}
	}, redistest.Real, redistest.Cluster)
}
