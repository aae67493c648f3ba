package toptexts_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/toptexts"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func mustNew(t *testing.T, n int, window time.Duration) *toptexts.Table {
	t.Helper()
	tb, err := toptexts.New(n, window)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func show(es []toptexts.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s=%d ", e.Key, e.Count)
	}
	return strings.TrimSpace(b.String())
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		n      int
		window time.Duration
	}{{0, time.Hour}, {-1, time.Hour}, {toptexts.MaxN + 1, time.Hour}, {5, 0}} {
		if _, err := toptexts.New(tc.n, tc.window); err == nil {
			t.Errorf("New(%d, %v) succeeded", tc.n, tc.window)
		}
	}
}

// TestTopOfAThousandMessages: 1,000 messages over 50 texts, each observed
// with its running count as the bot learns it, in a shuffled order: a
// table of 5 holds the five most repeated, with their counts.
func TestTopOfAThousandMessages(t *testing.T) {
	// Text i is sent 40-i times for i < 10, and the rest spread over the
	// others: 1,000 in all.
	var msgs []string
	for i := range 10 {
		for range 40 - i {
			msgs = append(msgs, fmt.Sprintf("text%02d", i))
		}
	}
	for i := 0; len(msgs) < 1000; i++ {
		msgs = append(msgs, fmt.Sprintf("text%02d", 10+i%40))
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	tb := mustNew(t, 5, 24*time.Hour)
	counts := map[string]int64{}
	for i, m := range msgs {
		counts[m]++
		tb.Observe(m, counts[m], t0.Add(time.Duration(i)*time.Second))
	}
	if got, want := show(tb.Top(t0.Add(time.Hour))), "text00=40 text01=39 text02=38 text03=37 text04=36"; got != want {
		t.Errorf("top %s, want %s", got, want)
	}
	if tb.Kept() != 5 {
		t.Errorf("kept %d, want 5", tb.Kept())
	}
}

func TestObserveUpdatesAndReplaces(t *testing.T) {
	tb := mustNew(t, 2, time.Hour)
	tb.Observe("a", 3, t0)
	tb.Observe("b", 5, t0)
	tb.Observe("c", 3, t0) // not higher than the lowest kept (a=3)
	if got := show(tb.Top(t0)); got != "b=5 a=3" {
		t.Fatalf("top %s", got)
	}
	tb.Observe("c", 4, t0) // higher: takes a's place
	if got := show(tb.Top(t0)); got != "b=5 c=4" {
		t.Fatalf("top %s", got)
	}
	tb.Observe("b", 1, t0.Add(time.Minute)) // a count falls as the window moves
	if got := show(tb.Top(t0.Add(time.Minute))); got != "c=4 b=1" {
		t.Fatalf("top %s", got)
	}
}

// TestWindow: a key not observed for a window is no longer shown, and its
// place goes to a new key whatever its count.
func TestWindow(t *testing.T) {
	tb := mustNew(t, 2, time.Hour)
	tb.Observe("old", 100, t0)
	tb.Observe("new", 2, t0.Add(30*time.Minute))
	if got := show(tb.Top(t0.Add(59 * time.Minute))); got != "old=100 new=2" {
		t.Fatalf("top %s", got)
	}
	if got := show(tb.Top(t0.Add(time.Hour))); got != "new=2" {
		t.Fatalf("top after the window %s", got)
	}
	tb.Observe("newer", 1, t0.Add(time.Hour))
	if got := show(tb.Top(t0.Add(time.Hour))); got != "new=2 newer=1" {
		t.Fatalf("top %s: the expired key kept its place", got)
	}
}

// TestBounded: a flood of distinct keys, some very long, keeps N keys of
// at most MaxKeyBytes each, cut on a UTF-8 boundary.
func TestBounded(t *testing.T) {
	tb := mustNew(t, 3, time.Hour)
	long := strings.Repeat("я", toptexts.MaxKeyBytes) // 2 bytes a rune
	for i := range 100_000 {
		tb.Observe(fmt.Sprintf("%d%s", i, long), int64(i%7+1), t0)
	}
	if tb.Kept() != 3 {
		t.Fatalf("kept %d keys, want 3", tb.Kept())
	}
	for _, e := range tb.Top(t0) {
		if len(e.Key) > toptexts.MaxKeyBytes || !e.Cut || !strings.HasSuffix(e.Key, "я") || e.Count != 7 {
			t.Errorf("entry of %d bytes, cut %v, ends %q, count %d", len(e.Key), e.Cut, e.Key[len(e.Key)-4:], e.Count)
		}
	}
	tb.Observe("short", 8, t0)
	if e := tb.Top(t0)[0]; e.Key != "short" || e.Cut {
		t.Errorf("first %+v", e)
	}
}

func TestConcurrentObserve(t *testing.T) {
	tb := mustNew(t, 10, time.Hour)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tb.Observe(fmt.Sprintf("k%d", (g*7+i)%50), int64(i), t0.Add(time.Duration(i)*time.Millisecond))
				if i%100 == 0 {
					tb.Top(t0)
				}
			}
		})
	}
	wg.Wait()
	if n := len(tb.Top(t0.Add(time.Minute))); n != 10 {
		t.Errorf("%d kept, want 10", n)
	}
}

func ExampleTable() {
	tb, _ := toptexts.New(2, 24*time.Hour)
	now := time.Now()
	seen := map[string]int64{} // what the store answers: each text's count
	for _, text := range []string{"hi", "hello", "hi", "bye", "hi", "hello"} {
		seen[text]++
		tb.Observe(text, seen[text], now)
	}
	for _, e := range tb.Top(now) {
		fmt.Println(e.Key, e.Count)
	}
	// Output:
	// hi 3
	// hello 2
}

// BenchmarkObserve: one observation, as each counted message makes with
// TOP_TEXTS set, over 10,000 distinct texts into a table of 100.
func BenchmarkObserve(b *testing.B) {
	tb, _ := toptexts.New(100, time.Hour)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("218245623:t:some message number %d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tb.Observe(keys[i%len(keys)], int64(i%500), t0)
		i++
	}
}
