package access_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// forEachLister runs body once per store that lists: memory, and Redis on
// every backend.
func forEachLister(t *testing.T, body func(t *testing.T, s interface {
	access.Store
	access.Lister
})) {
	t.Run("memory", func(t *testing.T) { body(t, access.NewMemory(access.MemoryLimits{})) })
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			body(t, newRedis(t, tg.Client, cleanPrefix(t, tg)))
		})
	})
}

// listAll pages through prefix, limit at a time, and returns every name
// listed (in order, repeats kept) and the totals.
func listAll(t testing.TB, s access.Lister, prefix string, limit int) ([]string, map[string]int64) {
	t.Helper()
	var names []string
	totals := map[string]int64{}
	after := ""
	for pages := 0; ; pages++ {
		entries, more, err := s.List(context.Background(), prefix, after, limit)
		if err != nil {
			t.Fatalf("List(%q, after %q): %v", prefix, after, err)
		}
		if len(entries) > limit {
			t.Fatalf("page of %d entries, limit %d", len(entries), limit)
		}
		for _, e := range entries {
			names = append(names, e.Name)
			totals[e.Name] = e.Total
			after = e.Name
		}
		if !more {
			return names, totals
		}
		if pages > 10000 {
			t.Fatal("List never ends")
		}
	}
}

func TestListByPrefix(t *testing.T) {
	forEachLister(t, func(t *testing.T, s interface {
		access.Store
		access.Lister
	}) {
		ctx := context.Background()
		for i, name := range []string{"page_a", "page_views_article_1", "page_views_article_2", "page_views_article_10", "page_views_articlf", "page_views_article_\xff", "pagf", "other"} {
			if _, err := s.Add(ctx, name, int64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		s.Add(ctx, "page_views_article_1", 10)
		for _, limit := range []int{1, 2, 3, 100} {
			names, totals := listAll(t, s, "page_views_article_", limit)
			if got := fmt.Sprint(names); got != "[page_views_article_1 page_views_article_10 page_views_article_2 page_views_article_\xff]" {
				t.Fatalf("limit %d: names %q", limit, names)
			}
			if totals["page_views_article_1"] != 12 || totals["page_views_article_\xff"] != 6 {
				t.Fatalf("totals %v", totals)
			}
		}
		if names, _ := listAll(t, s, "", 3); len(names) != 8 || names[0] != "other" {
			t.Fatalf("all names %q", names)
		}
		if names, _ := listAll(t, s, "zzz", 3); len(names) != 0 {
			t.Fatalf("names under zzz %q", names)
		}
		for _, tc := range []struct {
			prefix string
			limit  int
		}{{"p", 0}, {"p", access.MaxListLimit + 1}, {string(make([]byte, access.MaxNameLen+1)), 10}} {
			if _, _, err := s.List(ctx, tc.prefix, "", tc.limit); !errors.Is(err, access.ErrInvalidLimit) && !errors.Is(err, access.ErrInvalidName) {
				t.Errorf("List(%d-byte prefix, limit %d) = %v, want an invalid-argument error", len(tc.prefix), tc.limit, err)
			}
		}
	})
}

// TestListExactlyOnceWhileCreating: paging covers every counter that
// existed before the listing began exactly once, while other counters
// under the same prefix are created concurrently.
func TestListExactlyOnceWhileCreating(t *testing.T) {
	forEachLister(t, func(t *testing.T, s interface {
		access.Store
		access.Lister
	}) {
		ctx := context.Background()
		const before = 300
		for i := range before {
			if _, err := s.Add(ctx, "p:"+strconv.Itoa(i*7), 1); err != nil {
				t.Fatal(err)
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Names that sort between and around the existing ones.
				if _, err := s.Add(ctx, "p:"+strconv.Itoa(i*7+3), 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
		names, _ := listAll(t, s, "p:", 7)
		close(stop)
		wg.Wait()
		seen := map[string]int{}
		for _, n := range names {
			seen[n]++
			if seen[n] > 1 {
				t.Fatalf("%q listed twice", n)
			}
		}
		for i := range before {
			if seen["p:"+strconv.Itoa(i*7)] != 1 {
				t.Fatalf("%q listed %d times, want once", "p:"+strconv.Itoa(i*7), seen["p:"+strconv.Itoa(i*7)])
			}
		}
	})
}
