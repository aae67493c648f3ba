package freq_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestUpgrade: the keys the former layout wrote (a list, a total and a
// dedupe key per message, by the former script) keep counting right with
// the compact layout: its messages are answered again as they were, the
// next count takes its occurrences over, exactly to the second, and
// deletes them.
func TestUpgrade(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		const w = 100
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		former := func(identity, ev string, at int64) freq.Result {
			t.Helper()
			r, err := s.CountFormer(ctx, identity, ev, sec(at), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		check := func(what string, r freq.Result, previous, at int64, duplicate bool) {
			t.Helper()
			if want := (freq.Result{Previous: previous, Duplicate: duplicate, Time: sec(at).Unix()}); r != want {
				t.Fatalf("%s: got %+v, want %+v", what, r, want)
			}
		}
		k := s.Keys("t", "")
		formerLeft := func() int64 { return tg.Client.Exists(ctx, k[3]).Val() + tg.Client.Exists(ctx, k[4]).Val() }

		// The former version counts five messages of a text.
		m := &model{window: w}
		ats := []int64{0, 10, 10, 20, 30}
		answers := make([]int64, len(ats))
		for i, at := range ats {
			answers[i], _ = m.add(at, 1)
			check("former count", former("t", fmt.Sprint("m", i), at), answers[i], at, false)
		}

		// Upgraded: its messages delivered again get their answers, and
		// change nothing.
		for i, at := range ats {
			check("former message again", count(t, s, "t", fmt.Sprint("m", i), sec(40)), answers[i], at, true)
		}
		if formerLeft() != 2 || tg.Client.Exists(ctx, k[0]).Val() != 0 {
			t.Fatal("a duplicate converted the former keys")
		}

		// A new message: the former occurrences are taken over, those out
		// of the window dropped (0 <= 105-100), and the former keys deleted.
		p, _ := m.add(105, 1)
		check("first count after the upgrade", count(t, s, "t", "n1", sec(105)), p, 105, false)
		if n := formerLeft(); n != 0 {
			t.Fatalf("%d former keys left", n)
		}
		want := []string{fmt.Sprint(sec(10).Unix()) + ":2", fmt.Sprint(sec(20).Unix()), fmt.Sprint(sec(30).Unix()), fmt.Sprint(sec(105).Unix())}
		if st := stateOf(t, tg, s, "t"); !slices.Equal(st.List, want) || st.Total != "5" {
			t.Fatalf("state %+v, want %v total 5", st, want)
		}
		for _, at := range []int64{112, 112, 125, 200} {
			p, rec := m.add(at, 1)
			check("counting on", count(t, s, "t", "", sec(at)), p, rec, false)
		}
		// The former dedupe keys still answer their messages.
		check("former message after the conversion", count(t, s, "t", "m3", sec(201)), answers[3], 20, true)

		// A rolling upgrade: a former instance, still running, counts
		// after the conversion (seeing only its own keys); the next count
		// merges both, and nothing is lost or counted twice.
		former("t", "o1", 205)
		former("t", "o2", 205)
		m.add(205, 2)
		p, _ = m.add(206, 1)
		check("after a former instance's counts", count(t, s, "t", "n2", sec(206)), p, 206, false)
		if n := formerLeft(); n != 0 {
			t.Fatalf("%d former keys left", n)
		}
		if st := stateOf(t, tg, s, "t"); sumList(t, st.List) != m.total {
			t.Fatalf("state %+v, want %d occurrences", st, m.total)
		}

		// A text the former version saw once, merged into the compact
		// text seen once (its message's dedupe state kept).
		check("new text", count(t, s, "u", "a", sec(300)), 0, 300, false)
		former("u", "b", 301)
		check("merged", count(t, s, "u", "c", sec(302)), 2, 302, false)
		check("its first message", count(t, s, "u", "a", sec(303)), 0, 300, true)
		check("the former one", count(t, s, "u", "b", sec(303)), 0, 301, true)

		// A former text whose occurrences all left the window.
		former("gone", "", 0)
		check("expired former text", count(t, s, "gone", "", sec(w+1)), 0, w+1, false)
		if g := s.Keys("gone", ""); tg.Client.Exists(ctx, g[3]).Val()+tg.Client.Exists(ctx, g[4]).Val() != 0 {
			t.Fatal("the expired former text's keys are left")
		}
	})
}

// TestUpgradeQueuedMark: earlier versions added ":q" to a message's
// dedupe state once its reply was queued, in the former layout's dedupe
// key and in the compact layout's dedupe hash; such a message is still
// answered as it was and counted once.
func TestUpgradeQueuedMark(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		if _, err := s.CountFormer(ctx, "t", "m1", time.Time{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		ek := s.Keys("t", "m1")[5]
		mustDo(t, tg.Client.Set(ctx, ek, tg.Client.Get(ctx, ek).Val()+":q", time.Hour))
		first, err := s.CountResult(ctx, "t", "m2")
		if err != nil {
			t.Fatal(err)
		}
		k := s.Keys("t", "m2")
		marked := 0
		for _, bucket := range k[1:3] {
			for f, v := range tg.Client.HGetAll(ctx, bucket).Val() {
				mustDo(t, tg.Client.HSet(ctx, bucket, f, v+":q"))
				marked++
			}
		}
		if marked != 1 {
			t.Fatalf("%d dedupe fields, want m2's alone", marked)
		}
		for _, c := range []struct {
			ev       string
			previous int64
		}{{"m1", 0}, {"m2", first.Previous}} {
			r, err := s.CountResult(ctx, "t", c.ev)
			if err != nil || r.Previous != c.previous || !r.Duplicate {
				t.Fatalf("%s: %+v, %v; want %d as a duplicate", c.ev, r, err, c.previous)
			}
		}
		if r, err := s.CountResult(ctx, "t", "m3"); err != nil || r.Previous != 2 || r.Duplicate {
			t.Fatalf("m3: %+v, %v; want 2", r, err)
		}
	})
}

// TestKeyPattern: KeyPattern matches the text keys and no other key of a
// Store; Held tells what each holds.
func TestKeyPattern(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		count(t, s, "once", "m1", sec(0))
		for i := range 3 {
			count(t, s, "thrice", fmt.Sprint("m", i+2), sec(int64(i)))
		}
		if _, err := s.CountFormer(ctx, "former", "m9", sec(0), time.Hour); err != nil {
			t.Fatal(err)
		}
		former := s.Keys("x", "")[3]
		prefix := former[:strings.Index(former, "f:{")]
		held := map[string]int64{}
		for _, k := range redistest.Keys(t, tg.Client, prefix) {
			if !matchBytes(freq.KeyPattern(prefix), k) {
				continue
			}
			n, err := freq.Held(ctx, tg.Client, k)
			if err != nil {
				t.Fatal(err)
			}
			held[k] = n
		}
		want := map[string]int64{s.Keys("once", "")[0]: 1, s.Keys("thrice", "")[0]: 3}
		if !maps.Equal(held, want) {
			t.Fatalf("text keys %v, want %v", held, want)
		}
		if n, err := freq.Held(ctx, tg.Client, s.Keys("none", "")[0]); n != 0 || err != nil {
			t.Fatalf("Held of a missing key: %d, %v", n, err)
		}
		if _, err := freq.Held(ctx, tg.Client, s.Keys("thrice", "")[1]); err == nil {
			t.Fatal("Held of a dedupe hash: no error")
		}
	})
}

// matchBytes is Redis's glob match for patterns whose only special
// character is '?', one byte (path.Match takes it for a rune).
func matchBytes(pattern, s string) bool {
	if len(pattern) != len(s) {
		return false
	}
	for i := range len(s) {
		if pattern[i] != '?' && pattern[i] != s[i] {
			return false
		}
	}
	return true
}

// TestUpgradeWindowCloses: Load notes when the compact layout began (the
// first Load in this Redis) and reads that marker afterwards. Until the
// window and the dedupe time have passed since, the former layout's keys
// are read and converted; after, they are not read: a former message's
// dedupe key no longer answers it, and a former list is left alone.
func TestUpgradeWindowCloses(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		const w = 100
		open := func() *freq.Store {
			s, err := freq.New(tg.Client, freq.Options{Prefix: prefix, Window: w * time.Second, DedupeTTL: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Load(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := open()
		marker := prefix + "f:layout"
		began, err := tg.Client.Get(ctx, marker).Int64()
		if now := time.Now().Unix(); err != nil || began < now-5 || began > now+5 {
			t.Fatalf("marker %d, %v; want the time of the first Load, about %d", began, err, now)
		}
		if ttl := tg.Client.TTL(ctx, marker).Val(); ttl != -1 {
			t.Fatalf("marker TTL %v, want none", ttl)
		}
		// Inside the window: the former keys are read.
		if _, err := s.CountFormer(ctx, "t", "m1", time.Time{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if r := countNow(t, s, "t", "m1"); r.Previous != 0 || !r.Duplicate {
			t.Fatalf("a former message inside the window: %+v, want 0 as a duplicate", r)
		}
		if n, err := s.Seen(ctx, "t"); err != nil || n != 1 {
			t.Fatalf("Seen inside the window: %d, %v; want the former occurrence", n, err)
		}

		// A later Load keeps the marker; once it is older than the window,
		// the dedupe time and their margins, the former keys are not read.
		mustDo(t, tg.Client.Set(ctx, marker, time.Now().Unix()-w-10-2*60-1, 0))
		s = open()
		if _, err := s.CountFormer(ctx, "u", "m2", time.Time{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if r := countNow(t, s, "u", "m2"); r.Previous != 0 || r.Duplicate {
			t.Fatalf("a former message after the window: %+v, want counted anew, its former dedupe key not read", r)
		}
		if n, err := s.Seen(ctx, "u"); err != nil || n != 1 {
			t.Fatalf("Seen after the window: %d, %v; want the new occurrence alone", n, err)
		}
		k := s.Keys("u", "m2")
		if tg.Client.Exists(ctx, k[3]).Val() != 1 {
			t.Fatal("the former list was converted after the window")
		}
		// A store that was not loaded reads them, as ever.
		unloaded := mustNew(t, tg.Client, freq.Options{Prefix: prefix, Window: w * time.Second, DedupeTTL: 10 * time.Second})
		if _, err := s.CountFormer(ctx, "v", "m3", time.Time{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if r := countNow(t, unloaded, "v", "m3"); r.Previous != 0 || !r.Duplicate {
			t.Fatalf("a store not loaded: %+v, want the former dedupe key read", r)
		}
	})
}
