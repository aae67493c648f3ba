package freq_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// sameBucket returns n identities of s that share one bucket.
func sameBucket(t testing.TB, s *freq.Store, n int) []string {
	t.Helper()
	byBucket := map[string][]string{}
	for i := range 10000 {
		id := "text " + strconv.Itoa(i)
		b := s.Keys(id)[3]
		if byBucket[b] = append(byBucket[b], id); len(byBucket[b]) == n {
			return byBucket[b]
		}
	}
	t.Fatalf("no %d of 10,000 identities share a bucket", n)
	return nil
}

// fields reads a bucket: its texts' seconds by identity (of ids), and its
// own fields.
func fields(t testing.TB, tg *redistest.Target, s *freq.Store, ids []string) (texts map[string]string, own map[string]string) {
	t.Helper()
	all, err := tg.Client.HGetAll(context.Background(), s.Keys(ids[0])[3]).Result()
	if err != nil {
		t.Fatal(err)
	}
	texts, own = map[string]string{}, map[string]string{}
	byField := map[string]string{}
	for _, id := range ids {
		byField[s.Field(id)] = id
	}
	for f, v := range all {
		switch id, ok := byField[f]; {
		case ok:
			texts[id] = v
		case f == "o" || f == "e":
			own[f] = v
		default:
			t.Fatalf("bucket field %q is no text of %q", f, ids)
		}
	}
	return texts, own
}

// TestBucketOnceThenList: a text seen once is its bucket's field holding
// its second, and has no key; the second occurrence moves it to a list of
// its own, counted right; once every occurrence left the window, the next
// one deletes the list and puts the text back into its bucket. Record
// (record.lua on a single server) writes the same.
func TestBucketOnceThenList(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		const w = 100
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		ids := sameBucket(t, s, 2)
		a, b := ids[0], ids[1]
		count(t, s, a, "", sec(0))
		count(t, s, b, "", sec(3))
		texts, own := fields(t, tg, s, ids)
		if texts[a] != strconv.FormatInt(sec(0).Unix(), 10) || texts[b] != strconv.FormatInt(sec(3).Unix(), 10) || own["o"] != texts[a] {
			t.Fatalf("bucket texts %v, own %v; want %s at %d and %s at %d, o the oldest", texts, own, a, sec(0).Unix(), b, sec(3).Unix())
		}
		if n := tg.Client.Exists(ctx, s.Keys(a)[0], s.Keys(b)[0]).Val(); n != 0 {
			t.Fatalf("%d text keys, want none for texts seen once", n)
		}
		if n, err := s.SeenAt(ctx, a, sec(w-1)); err != nil || n != 1 {
			t.Fatalf("Seen at the window's last second: %d, %v; want 1", n, err)
		}

		// The second occurrence, at the same second and then later.
		if r := count(t, s, b, "", sec(3)); r.Previous != 1 {
			t.Fatalf("second occurrence: %+v, want Previous 1", r)
		}
		if r := count(t, s, b, "", sec(50)); r.Previous != 2 {
			t.Fatalf("third occurrence: %+v, want Previous 2", r)
		}
		if st := stateOf(t, tg, s, b); st.Total != "3" || fmt.Sprint(st.List) != fmt.Sprintf("[%d:2 %d]", sec(3).Unix(), sec(50).Unix()) {
			t.Fatalf("after three: %+v", st)
		}
		if texts, _ := fields(t, tg, s, ids); len(texts) != 1 || texts[b] != "" {
			t.Fatalf("bucket texts %v, want %s alone", texts, a)
		}
		if n, err := s.SeenAt(ctx, b, sec(50)); err != nil || n != 3 {
			t.Fatalf("Seen: %d, %v; want 3", n, err)
		}

		// Every occurrence of b's list left the window: b starts anew in
		// its bucket, its key deleted.
		if r := count(t, s, b, "", sec(50+w)); r.Previous != 0 {
			t.Fatalf("after the window: %+v, want Previous 0", r)
		}
		if tg.Client.Exists(ctx, s.Keys(b)[0]).Val() != 0 {
			t.Fatal("the list of a text whose occurrences left the window is still there")
		}
		if st := stateOf(t, tg, s, b); st.Total != "1" || st.List[0] != strconv.FormatInt(sec(50+w).Unix(), 10) {
			t.Fatalf("back in the bucket: %+v", st)
		}

		// Record writes the layout Count reads.
		q := newQueue(t, s, 100)
		if r := recordOf(t, s, q, "recorded", "m1"); r.Previous != 0 {
			t.Fatalf("Record: %+v", r)
		}
		if st := stateOf(t, tg, s, "recorded"); st.Total != "1" || tg.Client.Exists(ctx, s.Keys("recorded")[0]).Val() != 0 {
			t.Fatalf("a text recorded once: %+v, want its bucket's field alone", st)
		}
		if r := recordOf(t, s, q, "recorded", "m2"); r.Previous != 1 {
			t.Fatalf("Record again: %+v", r)
		}
		if st := stateOf(t, tg, s, "recorded"); st.Total != "2" || len(st.List) == 0 {
			t.Fatalf("a text recorded twice: %+v, want a list of 2", st)
		}
	})
}

// TestBucketPurge: a write that finds the bucket's oldest second a quarter
// of the window (slack) past the window drops the texts that left the window,
// to the second, and keeps the others with their seconds; not before.
// The answers at the window's edges are the same across the purge.
func TestBucketPurge(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		const w, slack = 240, 60 // slack: w / 4
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		ids := sameBucket(t, s, 5)
		at := map[string]int64{ids[0]: 0, ids[1]: 60, ids[2]: 61, ids[3]: 200}
		for _, id := range ids[:4] {
			count(t, s, id, "", sec(at[id]))
		}
		seen := func(id string, n int64) int64 {
			t.Helper()
			v, err := s.SeenAt(ctx, id, sec(n))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// Before: ids[1] (second 60) is inside at 299, gone at 300.
		if seen(ids[1], w+59) != 1 || seen(ids[1], w+60) != 0 || seen(ids[2], w+60) != 1 {
			t.Fatal("before the purge: wrong edges")
		}
		// At 299 the oldest (0) is not a slack past the window yet: no purge.
		count(t, s, ids[4], "", sec(w+slack-1))
		if texts, _ := fields(t, tg, s, ids); len(texts) != 5 {
			t.Fatalf("purged too early: %v", texts)
		}
		mustDo(t, tg.Client.HDel(ctx, s.Keys(ids[4])[3], s.Field(ids[4])))
		// At 300 it is: the texts at 0 and 60 left the window (cutoff 60),
		// 61 and 200 stay, and o becomes the oldest kept.
		count(t, s, ids[4], "", sec(w+slack))
		texts, own := fields(t, tg, s, ids)
		want := map[string]string{ids[2]: strconv.FormatInt(sec(61).Unix(), 10), ids[3]: strconv.FormatInt(sec(200).Unix(), 10), ids[4]: strconv.FormatInt(sec(w+slack).Unix(), 10)}
		if fmt.Sprint(texts) != fmt.Sprint(want) || own["o"] != want[ids[2]] {
			t.Fatalf("after the purge: texts %v, o %s; want %v, o %s", texts, own["o"], want, want[ids[2]])
		}
		// After: the same answers at the edges.
		if seen(ids[1], w+60) != 0 || seen(ids[2], w+60) != 1 || seen(ids[2], w+61) != 0 || seen(ids[3], w+199) != 1 {
			t.Fatal("after the purge: wrong edges")
		}
		if r := count(t, s, ids[2], "", sec(w+60)); r.Previous != 1 {
			t.Fatalf("a kept text at the window's last second: %+v, want Previous 1", r)
		}
		if r := count(t, s, ids[1], "", sec(w+60)); r.Previous != 0 {
			t.Fatalf("a purged text: %+v, want Previous 0", r)
		}
	})
}

// TestBucketModel: many texts in two buckets (BucketBits 1), counted at
// random seconds across many windows and purges, answer what a model of
// every occurrence answers, and Seen agrees with it between counts; and in
// buckets named past the slot's 14 bits (BucketBits 17).
func TestBucketModel(t *testing.T) {
	for _, bits := range []int{1, 17} {
		t.Run(strconv.Itoa(bits), func(t *testing.T) { bucketModel(t, bits) })
	}
}

func bucketModel(t *testing.T, bits int) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		const w = 48 // slack 12
		s := newStore(t, tg, freq.Options{Window: w * time.Second, BucketBits: bits})
		rng := rand.New(rand.NewPCG(3, 4))
		seen := map[string][]int64{}
		steps := 600
		if tg.Kind == redistest.Mini {
			steps = 250 // miniredis builds a Lua interpreter per call
		}
		now := int64(0)
		inside := func(id string) (n int64) {
			for _, at := range seen[id] {
				if at > now-w {
					n++
				}
			}
			return n
		}
		for i := range steps {
			now += int64(rng.IntN(4))
			id := "t" + strconv.Itoa(rng.IntN(30))
			if r := count(t, s, id, "", sec(now)); r.Previous != inside(id) {
				t.Fatalf("step %d, %s at %d: Previous %d, want %d", i, id, now, r.Previous, inside(id))
			}
			seen[id] = append(seen[id], now)
			other := "t" + strconv.Itoa(rng.IntN(30))
			if n, err := s.SeenAt(ctx, other, sec(now)); err != nil || n != inside(other) {
				t.Fatalf("step %d, Seen %s at %d: %d, %v; want %d", i, other, now, n, err, inside(other))
			}
		}
		if bits != 1 {
			return
		}
		// The buckets hold no text that left the window more than a slack
		// and a window's worth of writes ago: each was purged on the way.
		for _, b := range []string{s.Keys("t0")[3], s.Keys("t1")[3]} {
			for f, v := range tg.Client.HGetAll(ctx, b).Val() {
				if at, _ := strconv.ParseInt(v, 10, 64); f != "o" && f != "e" && at < sec(now-3*w).Unix() {
					t.Errorf("bucket %q holds a text of second %d, now %d", b, at-base.Unix(), now)
				}
			}
		}
	})
}

// TestBucketForeign: a bucket of another type (only a foreign write makes
// one) is replaced when written: the text is counted anew.
func TestBucketForeign(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{Window: time.Minute})
		b := s.Keys("x")[3]
		mustDo(t, tg.Client.Set(ctx, b, "junk", time.Hour))
		if n, err := s.SeenAt(ctx, "x", sec(0)); err != nil || n != 0 {
			t.Fatalf("Seen over a foreign bucket: %d, %v", n, err)
		}
		if r := count(t, s, "x", "", sec(0)); r.Previous != 0 {
			t.Fatalf("over a foreign bucket: %+v", r)
		}
		if r := count(t, s, "x", "", sec(1)); r.Previous != 1 {
			t.Fatalf("next: %+v", r)
		}
		// A foreign value at the key of a text in its bucket: the text's
		// second occurrence replaces it with its list.
		count(t, s, "y", "", sec(0))
		mustDo(t, tg.Client.Set(ctx, s.Keys("y")[0], "junk", time.Hour))
		if n, err := s.SeenAt(ctx, "y", sec(1)); err != nil || n != 1 {
			t.Fatalf("Seen beside a foreign key: %d, %v; want 1", n, err)
		}
		if r := count(t, s, "y", "", sec(1)); r.Previous != 1 {
			t.Fatalf("beside a foreign key: %+v, want Previous 1", r)
		}
		if st := stateOf(t, tg, s, "y"); st.Total != "2" {
			t.Fatalf("state %+v, want a list of 2", st)
		}
	})
}
