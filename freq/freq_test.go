package freq_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

func TestSequence(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{})
		const n = 20
		var last int64
		for i := range n {
			r := countNow(t, s, "привет", "")
			if r.Previous != int64(i) || r.Duplicate {
				t.Fatalf("occurrence %d: got %+v, want Previous %d", i, r, i)
			}
			if r.Time < last || r.Time < time.Now().Add(-time.Hour).Unix() {
				t.Fatalf("occurrence %d: Time %d, previous %d, not a current clock", i, r.Time, last)
			}
			last = r.Time
		}
		// Other identities are independent of it and of each other,
		// including the empty one and ones differing only in case or space.
		for i := range 3 {
			for _, id := range []string{"Привет", "привет ", "", "a"} {
				if r := countNow(t, s, id, ""); r.Previous != int64(i) {
					t.Fatalf("%q occurrence %d: got %+v", id, i, r)
				}
			}
		}
		if got := sumList(t, stateOf(t, tg, s, "привет").List); got != n {
			t.Fatalf("list holds %d occurrences, want %d", got, n)
		}
	})
}

func TestWindowBoundary(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		for _, w := range []int64{1, 10, 86400} {
			t.Run(fmt.Sprintf("%ds", w), func(t *testing.T) {
				s := newStore(t, tg, freq.Options{Window: time.Duration(w) * time.Second})
				count(t, s, "kept", "", sec(0))
				count(t, s, "gone", "", sec(0))
				if r := count(t, s, "kept", "", sec(w-1)); r.Previous != 1 {
					t.Errorf("at t+window-1: Previous %d, want 1 (t still inside)", r.Previous)
				}
				if r := count(t, s, "gone", "", sec(w)); r.Previous != 0 {
					t.Errorf("at t+window: Previous %d, want 0 (t expired)", r.Previous)
				}
			})
		}
	})
}

// TestWindowBoundaryClock checks the same boundary through Redis TIME, which
// only miniredis lets a test set.
func TestWindowBoundaryClock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 3600
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		tg.Mini.SetTime(sec(0))
		if r := countNow(t, s, "kept", ""); r.Previous != 0 || r.Time != sec(0).Unix() {
			t.Fatalf("first: got %+v, want Previous 0 at %d", r, sec(0).Unix())
		}
		countNow(t, s, "gone", "")
		tg.Mini.SetTime(sec(w - 1))
		if r := countNow(t, s, "kept", ""); r.Previous != 1 || r.Time != sec(w-1).Unix() {
			t.Errorf("at t+window-1: got %+v, want Previous 1 at %d", r, sec(w-1).Unix())
		}
		tg.Mini.SetTime(sec(w))
		if r := countNow(t, s, "gone", ""); r.Previous != 0 {
			t.Errorf("at t+window: got %+v, want Previous 0", r)
		}
		// Only the occurrence at t+window-1 is left for "kept".
		if r := countNow(t, s, "kept", ""); r.Previous != 1 {
			t.Errorf("kept at t+window: got %+v, want Previous 1", r)
		}
	}, redistest.Mini)
}

func TestConcurrentSameText(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{})
		const n = 200
		got := together.Run(t, n, func(int) (int64, error) {
			previous, _, err := s.Count(context.Background(), "same", "")
			return previous, err
		})
		slices.Sort(got)
		for i, v := range got {
			if v != int64(i) {
				t.Fatalf("sorted answers %v..., want each of 0..%d once", got[:i+1], n-1)
			}
		}
		st := stateOf(t, tg, s, "same")
		if sumList(t, st.List) != n || st.Total != fmt.Sprint(n) {
			t.Fatalf("state %+v, want %d occurrences", st, n)
		}
	})
}

func TestRetriedEvent(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{DedupeTTL: 30 * time.Second})
		first := count(t, s, "text", "ev1", sec(0))
		if first.Previous != 0 || first.Duplicate {
			t.Fatalf("first delivery: %+v", first)
		}
		before := stateOf(t, tg, s, "text")
		// VK re-sends the event later: the same answer and second, nothing changes.
		for i := range 3 {
			r := count(t, s, "text", "ev1", sec(int64(5+i)))
			if r != (freq.Result{Previous: 0, Duplicate: true}) {
				t.Fatalf("retry %d: got %+v, want %+v as duplicate", i, r, first)
			}
		}
		if after := stateOf(t, tg, s, "text"); !slices.Equal(after.List, before.List) || after.Total != before.Total {
			t.Fatalf("a retry changed the state: %+v → %+v", before, after)
		}
		if r := count(t, s, "text", "ev2", sec(6)); r.Previous != 1 || r.Duplicate {
			t.Fatalf("another event: %+v, want Previous 1", r)
		}
		// No event id: never deduplicated.
		for i := range 2 {
			if r := count(t, s, "text", "", sec(6)); r.Previous != int64(2+i) || r.Duplicate {
				t.Fatalf("no event id, call %d: %+v", i, r)
			}
		}
		// ev1's answer is in the slot's dedupe hash of its bucket, which
		// lives at most two dedupe TTLs.
		k := s.Keys("text")
		var buckets int
		for _, b := range k[1:3] {
			switch ttl := tg.Client.PTTL(ctx, b).Val(); {
			case ttl > 60*time.Second:
				t.Fatalf("%s: TTL %v, want at most 60s", b, ttl)
			case ttl > 0:
				buckets++
			}
		}
		if buckets == 0 {
			t.Fatalf("no dedupe hash of %v has a TTL", k[1:3])
		}
		if tg.Kind == redistest.Mini {
			// Remembered for the dedupe TTL at least (sec(0) + 30 is later
			// than sec(7) + 25)...
			tg.Mini.FastForward(25 * time.Second)
			if r := count(t, s, "text", "ev1", sec(7)); !r.Duplicate {
				t.Fatalf("within the dedupe TTL: %+v, want a duplicate", r)
			}
			// ... and forgotten after twice that: the id is counted again.
			tg.Mini.FastForward(36 * time.Second)
			if r := count(t, s, "text", "ev1", sec(7)); r.Previous != 4 || r.Duplicate {
				t.Fatalf("after twice the dedupe TTL: %+v, want Previous 4", r)
			}
		}
	})
}

// A dedupe key of any length is accepted (its hash is the record), and
// still tells one event from another.
func TestLongDedupeKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{})
		long := strings.Repeat("e", 300)
		other := long[:299] + "f"
		if r := count(t, s, "text", long, sec(0)); r.Previous != 0 || r.Duplicate {
			t.Fatalf("first: %+v", r)
		}
		if r := count(t, s, "text", long, sec(1)); r.Previous != 0 || !r.Duplicate {
			t.Fatalf("same long key again: %+v, want a duplicate", r)
		}
		if r := count(t, s, "text", other, sec(1)); r.Previous != 1 || r.Duplicate {
			t.Fatalf("another long key with the same start: %+v, want counted", r)
		}
	})
}

// model is the window kept in Go, to check the script's answers against.
type model struct {
	window    int64
	secs, ns  []int64
	total     int64
	completed int64 // occurrences recorded
}

// add records n occurrences at second at and returns how many earlier ones
// are inside the window, and the second they were recorded at.
func (m *model) add(at, n int64) (previous, recorded int64) {
	if k := len(m.secs); k > 0 && at < m.secs[k-1] {
		at = m.secs[k-1]
	}
	for len(m.secs) > 0 && m.secs[0] <= at-m.window {
		m.total -= m.ns[0]
		m.secs, m.ns = m.secs[1:], m.ns[1:]
	}
	previous = m.total
	if k := len(m.secs); k > 0 && m.secs[k-1] == at {
		m.ns[k-1] += n
	} else {
		m.secs, m.ns = append(m.secs, at), append(m.ns, n)
	}
	m.total += n
	m.completed += n
	return previous, at
}

// hotPlan spreads occurrences over about 2.5 windows of w seconds: up to
// 2·occurrences/(2.5·w) per second, with one-second gaps and one gap longer
// than the window. It returns (second, count) pairs.
func hotPlan(occurrences, w int64) [][2]int64 {
	spread := 1 + 2*occurrences/(w*5/2)
	var plan [][2]int64
	left := occurrences
	for s := int64(0); left > 0; s++ {
		if s%11 == 0 || (s >= w && s < 2*w+100) {
			continue
		}
		n := min(left, 1+(s*37)%spread)
		plan = append(plan, [2]int64{s, n})
		left -= n
	}
	return plan
}

// countRound counts n occurrences of identity at at from several goroutines
// and returns the answers sorted.
func countRound(t *testing.T, s *freq.Store, identity string, at time.Time, n int64) []freq.Result {
	t.Helper()
	const workers = 8
	got := make([]freq.Result, n)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := int64(w); i < n; i += workers {
				got[i], errs[w] = s.CountAt(context.Background(), identity, "", at)
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b freq.Result) int { return int(a.Previous - b.Previous) })
	return got
}

func TestHotText(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		// The plan's shape (about 2.5 windows, one-second gaps, a gap longer
		// than the window, hundreds of seconds in the list) is the same at
		// any count; the count sets how many occurrences of one
		// second are counted together: up to 27 at 20,000, over three for
		// each of countRound's 8 workers, so every round counts
		// concurrently (100,000 proved no more, in 6 s a variant).
		occurrences := int64(20_000)
		if tg.Kind == redistest.Mini {
			// miniredis builds a Lua interpreter per call: about 1 ms under
			// -race (10,000 took 6 s idle, 12 s beside another package).
			// It runs one call at a time whatever the workers do, so the
			// real servers count concurrently; here 5,000 (up to 7 a
			// second) keep the plan's shape for its Lua.
			occurrences = 5_000
		}
		const w = 600
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		m := &model{window: w}
		for _, p := range hotPlan(occurrences, w) {
			want, at := m.add(p[0], p[1])
			for i, r := range countRound(t, s, "hot", sec(p[0]), p[1]) {
				if r.Previous != want+int64(i) || r.Time != sec(at).Unix() || r.Duplicate {
					t.Fatalf("second %d, answer %d: got %+v, want Previous %d at %d", p[0], i, r, want+int64(i), sec(at).Unix())
				}
			}
		}
		if m.completed != occurrences {
			t.Fatalf("plan has %d occurrences, want %d", m.completed, occurrences)
		}
		st := stateOf(t, tg, s, "hot")
		if len(st.List) != len(m.secs) || len(st.List) > w {
			t.Errorf("list has %d entries, want %d (the distinct seconds in the window, at most %d)", len(st.List), len(m.secs), w)
		}
		if sum := sumList(t, st.List); sum != m.total || st.Total != fmt.Sprint(m.total) {
			t.Errorf("list sums to %d, total key %q, want %d", sum, st.Total, m.total)
		}
		count(t, s, "hot", "ev", sec(m.secs[len(m.secs)-1]))
		keys := s.Keys("hot")
		// The text's key, and the dedupe hash of one bucket, have a TTL.
		if ttl := tg.Client.TTL(ctx, keys[0]).Val(); ttl <= 0 {
			t.Errorf("%s: TTL %v, want > 0", keys[0], ttl)
		}
		if n := tg.Client.Exists(ctx, keys[1]).Val() + tg.Client.Exists(ctx, keys[2]).Val(); n != 1 {
			t.Errorf("%d dedupe hashes, want 1", n)
		}
		for _, k := range keys {
			if redisconn.Slot(k) != redisconn.Slot(keys[0]) {
				t.Errorf("%s is in slot %d, %s in %d", k, redisconn.Slot(k), keys[0], redisconn.Slot(keys[0]))
			}
			// miniredis answers 163 for every key and a single server
			// refuses CLUSTER KEYSLOT: only a cluster can confirm.
			if tg.Kind == redistest.Cluster {
				if got := tg.Client.ClusterKeySlot(ctx, k).Val(); got != int64(redisconn.Slot(k)) {
					t.Errorf("CLUSTER KEYSLOT %s = %d, computed %d", k, got, redisconn.Slot(k))
				}
			}
		}
	})
}

func TestKeySlot(t *testing.T) {
	// Examples from the Redis Cluster specification.
	for key, want := range map[string]int{
		"123456789":             0x31C3,
		"{user1000}.following":  redisconn.Slot("user1000"),
		"foo{}{bar}":            redisconn.Slot("foo{}{bar}"),
		"foo{{bar}}zap":         redisconn.Slot("{bar"),
		"foo{bar}{zap}":         redisconn.Slot("bar"),
		"{user1000}.followers":  redisconn.Slot("{user1000}.following"),
		"no tag at all, really": redisconn.Slot("no tag at all, really"),
	} {
		if got := redisconn.Slot(key); got != want {
			t.Errorf("redisconn.Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestClockBehindTail(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 100
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		countsAt(t, s, "t", []countAt{
			{at: 10, previous: 0, recorded: 10},
			{at: 10, previous: 1, recorded: 10},
			{at: 5, previous: 2, recorded: 10}, // clock 5 s behind: counted at 10
			{at: 11, previous: 3, recorded: 11},
			{at: 0, previous: 4, recorded: 11},
			{at: 110, previous: 2, recorded: 110}, // the three at 10 expired
		})
		want := []string{fmt.Sprint(sec(11).Unix()) + ":2", fmt.Sprint(sec(110).Unix())}
		if st := stateOf(t, tg, s, "t"); !slices.Equal(st.List, want) || st.Total != "3" {
			t.Fatalf("state %+v, want list %v total 3", st, want)
		}
	})
}

// TestClockBehindBucket: a text's second occurrence, on a clock behind its
// first (in its bucket), is counted at the first's second, where the text
// moves out to its list; both expire together.
func TestClockBehindBucket(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 100
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		countsAt(t, s, "t", []countAt{
			{at: 10, previous: 0, recorded: 10},
			{at: 5, previous: 1, recorded: 10}, // clock 5 s behind: counted at 10
			{at: 50, previous: 2, recorded: 50},
			{at: 110, previous: 1, recorded: 110}, // the two at 10 expired
		})
	})
}

// countAt is one count of countsAt: at a second (from sec's origin), the
// answer it must get and the second it must be recorded at.
type countAt struct{ at, previous, recorded int64 }

// countsAt counts text with s at each call's second, in order, and
// requires each answer.
func countsAt(t *testing.T, s *freq.Store, text string, calls []countAt) {
	t.Helper()
	for i, c := range calls {
		r := count(t, s, text, "", sec(c.at))
		if r.Previous != c.previous || r.Time != sec(c.recorded).Unix() {
			t.Fatalf("call %d at +%d: got %+v, want Previous %d at +%d", i, c.at, r, c.previous, c.recorded)
		}
	}
}

func TestScriptFlush(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		countNow(t, s, "x", "")
		if err := tg.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if r := countNow(t, s, "x", ""); r.Previous != 1 {
			t.Fatalf("after SCRIPT FLUSH: %+v, want Previous 1", r)
		}
		if err := s.Load(ctx); err != nil {
			t.Fatalf("Load after SCRIPT FLUSH: %v", err)
		}
		if r := countNow(t, s, "x", ""); r.Previous != 2 {
			t.Fatalf("after Load: %+v, want Previous 2", r)
		}
	})
}

func TestExpiredText(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 24 * time.Hour
		s := newStore(t, tg, freq.Options{})
		now := time.Now()
		// As the load tool's "expired" scenario: history older than the
		// window, then a message on the live clock.
		for i := range 50 {
			count(t, s, "old", "", now.Add(-w-time.Hour).Add(time.Duration(i)*time.Minute/2))
		}
		r := countNow(t, s, "old", "")
		if r.Previous != 0 {
			t.Fatalf("got %+v, want Previous 0", r)
		}
		if st := stateOf(t, tg, s, "old"); !slices.Equal(st.List, []string{fmt.Sprint(r.Time)}) || st.Total != "1" {
			t.Fatalf("state %+v, want one entry %d and total 1", st, r.Time)
		}

		// Partly expired: only the recent part is counted and kept.
		for _, ago := range []time.Duration{w + time.Hour, w + time.Second, w - time.Hour, time.Hour, time.Hour} {
			count(t, s, "mixed", "", now.Add(-ago))
		}
		if r := count(t, s, "mixed", "", now); r.Previous != 3 {
			t.Fatalf("mixed: got %+v, want Previous 3", r)
		}
		if st := stateOf(t, tg, s, "mixed"); len(st.List) != 3 || st.Total != "4" {
			t.Fatalf("mixed: state %+v, want 3 entries, total 4", st)
		}
	})
}

// TestSelfHealing: a text key whose value is not of the layout (only a
// foreign write makes one) is replaced: the text starts anew instead of
// failing every call on the key until it expires.
func TestSelfHealing(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{Window: time.Minute})
		k := s.Keys("x")[0]
		for name, write := range map[string]func() error{
			"short string":  func() error { return tg.Client.Set(ctx, k, "abc", 0).Err() },
			"list of junk":  func() error { return tg.Client.RPush(ctx, k, "junk").Err() },
			"broken header": func() error { return tg.Client.RPush(ctx, k, "3", "x", "5").Err() },
			"broken steps":  func() error { return tg.Client.RPush(ctx, k, "3", sec(5).Unix(), sec(-100).Unix(), "x", "5").Err() },
			"hash":          func() error { return tg.Client.HSet(ctx, k, "f", "v").Err() },
		} {
			t.Run(name, func(t *testing.T) {
				mustDo(t, tg.Client.Del(ctx, k))
				if err := write(); err != nil {
					t.Fatal(err)
				}
				if r := count(t, s, "x", name, sec(10)); r.Previous != 0 || r.Duplicate {
					t.Fatalf("over a foreign value: %+v, want Previous 0", r)
				}
				if r := count(t, s, "x", "", sec(11)); r.Previous != 1 {
					t.Fatalf("next: %+v, want Previous 1", r)
				}
				if st := stateOf(t, tg, s, "x"); st.Total != "2" {
					t.Fatalf("state %+v, want total 2", st)
				}
			})
		}
	})
}

// mustDo fails t if the Redis command failed.
func mustDo(t testing.TB, cmd redis.Cmder) {
	t.Helper()
	if err := cmd.Err(); err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
}

func TestTTL(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		const w = 10 * time.Minute
		const d = freq.DefaultDedupeTTL
		s := newStore(t, tg, freq.Options{Window: w})
		countNow(t, s, "x", "ev")
		countNow(t, s, "y", "")
		countNow(t, s, "y", "")
		k := s.Keys("x")
		// A text seen once is in its bucket, which outlasts it by a margin
		// at least (the TTL is moved on once a slack, a quarter of the
		// window: up to a margin and a slack).
		if tg.Client.Exists(ctx, k[0]).Val() != 0 {
			t.Errorf("%s exists: a text seen once has no key", k[0])
		}
		if ttl := tg.Client.PTTL(ctx, k[3]).Val(); ttl <= w+time.Minute || ttl > w+time.Minute+w/4 {
			t.Errorf("%s: TTL %v, want about %v", k[3], ttl, w+time.Minute+w/4)
		}
		// A text seen twice has a list of its own, whose TTL is about the
		// window and a margin (two from the step it was last moved on).
		y := s.Keys("y")[0]
		if ttl := tg.Client.PTTL(ctx, y).Val(); ttl <= w+time.Minute || ttl > w+2*time.Minute {
			t.Errorf("%s: TTL %v, want about %v", y, ttl, w+2*time.Minute)
		}
		// The message's dedupe state is in a dedupe hash of the slot, which
		// lives until the end of the next period of d.
		bucket := k[1]
		if tg.Client.Exists(ctx, bucket).Val() == 0 {
			bucket = k[2]
		}
		if ttl := tg.Client.PTTL(ctx, bucket).Val(); ttl <= d-time.Minute || ttl > 2*d {
			t.Errorf("%s: TTL %v, want in (%v, %v]", bucket, ttl, d, 2*d)
		}
		if tg.Kind == redistest.Mini {
			// An idle text disappears on its own, the dedupe state once its
			// own TTL is over.
			tg.Mini.FastForward(w + time.Minute + w/4)
			for _, gone := range []string{k[3], y} {
				if tg.Mini.Exists(gone) {
					t.Errorf("%s still exists after the window, a margin and a slack", gone)
				}
			}
			if !tg.Mini.Exists(bucket) {
				t.Errorf("%s expired before the dedupe TTL", bucket)
			}
			tg.Mini.FastForward(2*d - w - time.Minute - w/4)
			if tg.Mini.Exists(bucket) {
				t.Errorf("%s still exists after twice the dedupe TTL", bucket)
			}
		}
	})
}

func TestBadInput(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		good := mustNew(t, tg.Client, freq.Options{Prefix: prefix, Window: time.Minute})
		if _, err := good.CountAt(ctx, "x", "", sec(0)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, k := range good.Keys("x") {
				tg.Client.Del(context.Background(), k)
			}
		})
		before := stateOf(t, tg, good, "x")

		for name, c := range map[string]struct {
			rdb  redis.UniversalClient
			opts freq.Options
		}{
			"window 500ms":     {tg.Client, freq.Options{Prefix: prefix, Window: 500 * time.Millisecond}},
			"window -1s":       {tg.Client, freq.Options{Prefix: prefix, Window: -time.Second}},
			"window 1.5s":      {tg.Client, freq.Options{Prefix: prefix, Window: 1500 * time.Millisecond}},
			"window max":       {tg.Client, freq.Options{Prefix: prefix, Window: math.MaxInt64}},
			"dedupe TTL 500ms": {tg.Client, freq.Options{Prefix: prefix, DedupeTTL: 500 * time.Millisecond}},
			"dedupe TTL -1h":   {tg.Client, freq.Options{Prefix: prefix, DedupeTTL: -time.Hour}},
			"dedupe TTL 200y":  {tg.Client, freq.Options{Prefix: prefix, DedupeTTL: 200 * 365 * 24 * time.Hour}},
			"prefix {":         {tg.Client, freq.Options{Prefix: prefix + "{"}},
			"prefix }":         {tg.Client, freq.Options{Prefix: "}" + prefix}},
			"nil client":       {nil, freq.Options{Prefix: prefix}},
		} {
			t.Run(name, func(t *testing.T) {
				if s, err := freq.New(c.rdb, c.opts); !errors.Is(err, freq.ErrInvalid) || s != nil {
					t.Errorf("New: %v, %v; want ErrInvalid and no store", s, err)
				}
			})
		}
		calls := map[string]func() error{
			"before 1970": func() error { _, err := good.CountAt(ctx, "x", "", time.Unix(-1, 0)); return err },
			"zero time":   func() error { _, err := good.CountAt(ctx, "x", "", time.Time{}); return err },
			"year 10000": func() error {
				_, err := good.CountAt(ctx, "x", "", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
				return err
			},
		}
		for name, call := range calls {
			t.Run(name, func(t *testing.T) {
				if err := call(); !errors.Is(err, freq.ErrInvalid) {
					t.Errorf("got %v, want ErrInvalid", err)
				}
			})
		}
		after := stateOf(t, tg, good, "x")
		if !slices.Equal(after.List, before.List) || after.Total != before.Total {
			t.Errorf("state changed: %+v → %+v", before, after)
		}
		if keys := redistest.Keys(t, tg.Client, prefix); len(keys) != 1 {
			t.Errorf("keys under the prefix: %v, want only the good store's one", keys)
		}
	})
}

func TestErrorMessages(t *testing.T) {
	for _, c := range []struct {
		opts freq.Options
		want string
	}{
		{freq.Options{Window: 500 * time.Millisecond}, "freq: invalid input: window 500ms is shorter than 1s"},
		{freq.Options{Window: 1500 * time.Millisecond}, "freq: invalid input: window 1.5s is not a whole number of seconds"},
		{freq.Options{DedupeTTL: time.Millisecond}, "freq: invalid input: dedupe TTL 1ms is shorter than 1s"},
	} {
		_, err := freq.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), c.opts)
		if err == nil || err.Error() != c.want {
			t.Errorf("%+v: got %v, want %q", c.opts, err, c.want)
		}
	}
}

func TestRedisDown(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	s := newStore(t, tg, freq.Options{})
	tg.Mini.SetError("LOADING Redis is loading the dataset in memory")
	t.Cleanup(func() { tg.Mini.SetError("") })
	_, _, err := s.Count(context.Background(), "x", "")
	if err == nil || errors.Is(err, freq.ErrInvalid) || !strings.Contains(err.Error(), "LOADING") {
		t.Fatalf("got %v, want the server's error", err)
	}
}

func TestOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if w := mustNew(t, c, freq.Options{}).Window(); w != freq.DefaultWindow {
		t.Errorf("default window %v, want %v", w, freq.DefaultWindow)
	}
	if w := mustNew(t, c, freq.Options{Window: 90 * time.Second}).Window(); w != 90*time.Second {
		t.Errorf("window %v, want 90s", w)
	}
}

func TestKeys(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	sum := sha256.Sum256([]byte("hello"))
	top := binary.BigEndian.Uint32(sum[:4])
	for _, tc := range []struct {
		prefix string
		bits   int
		slot   int    // the first bits of the digest over the slots
		bucket string // after the tag
	}{
		{"", 0, int(top>>21) << 3, "b"}, // the default, 11 bits
		{"p:", 0, int(top>>21) << 3, "b"},
		{"", 14, int(top >> 18), "b"},
		{"", 1, int(top>>31) << 13, "b"},
		{"", 17, int(top >> 18), "b" + strconv.Itoa(int(top>>15&7))},
	} {
		p := tc.prefix
		if p == "" {
			p = "vkc:"
		}
		tag := p + "f:{" + freq.SlotTag(tc.slot) + "}"
		want := []string{tag + string(sum[16:25]), tag + "e0", tag + "e1", tag + tc.bucket}
		got := mustNew(t, c, freq.Options{Prefix: tc.prefix, BucketBits: tc.bits}).Keys("hello")
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q, %d bits: got %q, want %q", tc.prefix, tc.bits, got, want)
		}
		for _, k := range got {
			if redisconn.Slot(k) != tc.slot {
				t.Errorf("%q is in slot %d, want %d", k, redisconn.Slot(k), tc.slot)
			}
		}
	}
	// The default text key is 20 bytes: Redis allocates 24 for its name.
	s := mustNew(t, c, freq.Options{})
	if k := s.Keys("hello")[0]; len(k) != 20 {
		t.Errorf("text key %q is %d bytes, want 20", k, len(k))
	}
	// An identity that looks like a key cannot reach another identity's keys.
	if a, b := s.Keys("a}:l"), s.Keys("a"); a[0] == b[0] {
		t.Errorf("identities share keys: %q %q", a, b)
	}
	// The buckets spread over the slots: 2^11 of them, each in a slot of its
	// own, every eighth.
	seen := map[int]bool{}
	for i := range 100000 {
		k := s.Keys(strconv.Itoa(i))
		seen[redisconn.Slot(k[3])] = true
	}
	if len(seen) != 1<<freq.DefaultBucketBits {
		t.Errorf("100,000 texts in %d buckets' slots, want %d", len(seen), 1<<freq.DefaultBucketBits)
	}
}

// TestSlotTags: every slot has a tag of three letters or digits that Redis
// Cluster hashes into it.
func TestSlotTags(t *testing.T) {
	for n := range freq.Slots {
		tag := freq.SlotTag(n)
		if len(tag) != 3 || strings.ContainsAny(tag, "{}") || redisconn.Slot(tag) != n || freq.Slot(tag) != n {
			t.Fatalf("slot %d: tag %q hashes to %d", n, tag, redisconn.Slot(tag))
		}
	}
}

func TestParseReply(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply any
		want  freq.Result
		ok    bool
	}{
		{"counted", []any{int64(3), int64(0), int64(1700000000)}, freq.Result{Previous: 3, Time: 1700000000}, true},
		{"duplicate", []any{int64(0), int64(1), int64(5)}, freq.Result{Duplicate: true, Time: 5}, true},
		{"not a list", int64(3), freq.Result{}, false},
		{"short", []any{int64(3), int64(0)}, freq.Result{}, false},
		{"long", []any{int64(3), int64(0), int64(1), int64(1)}, freq.Result{}, false},
		{"string", []any{"3", int64(0), int64(1)}, freq.Result{}, false},
		{"nil", []any{nil, int64(0), int64(1)}, freq.Result{}, false},
		{"negative", []any{int64(-1), int64(0), int64(1)}, freq.Result{}, false},
		{"duplicate 2", []any{int64(1), int64(2), int64(1)}, freq.Result{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := freq.ParseReply(c.reply)
			if (err == nil) != c.ok || got != c.want {
				t.Errorf("got %+v, %v; want %+v, ok %v", got, err, c.want, c.ok)
			}
		})
	}
}
