package freq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// newQueue returns a queue under the store's test prefix (its stream
// tagged as a community's), holding at most maxLen entries.
func newQueue(t testing.TB, s *freq.Store, maxLen int64) *freq.Queue {
	t.Helper()
	prefix, _, _ := strings.Cut(s.Keys("x")[0], "f:{")
	q, err := freq.NewQueue(prefix+"o:{7}", maxLen, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// recordOf records the message dedupe of text in q and fails t on error.
func recordOf(t testing.TB, s *freq.Store, q *freq.Queue, text, dedupe string) freq.Recorded {
	t.Helper()
	r, err := s.Record(context.Background(), &freq.Message{Text: text, Dedupe: dedupe, Queue: q, Data: dedupe})
	if err != nil {
		t.Fatalf("Record(%q, %q): %v", text, dedupe, err)
	}
	return r
}

// entries reads q's stream: each entry's text, random_id and data.
func entries(t testing.TB, tg *redistest.Target, q *freq.Queue) (texts, data []string, ids []int32) {
	t.Helper()
	for _, m := range tg.Client.XRange(context.Background(), q.Stream(), "-", "+").Val() {
		if len(m.Values) != 1 {
			t.Fatalf("entry %s has the fields %v, want %s alone", m.ID, m.Values, freq.EntryField)
		}
		d, id, _, text, err := freq.ParseEntry(m.Values[freq.EntryField].(string))
		if err != nil {
			t.Fatal(err)
		}
		texts, data, ids = append(texts, text), append(data, d), append(ids, id)
	}
	return texts, data, ids
}

// TestRecordOncePerMessage: Record counts a message and queues its reply
// once, however often it comes, in one script on a single server and in
// two calls on a cluster (and on a single server told it is one); its
// record is one field of the community's state, 8 bytes.
func TestRecordOncePerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		for _, twoCalls := range []bool{tg.Kind == redistest.Cluster, true} {
			t.Run(fmt.Sprint("two calls ", twoCalls), func(t *testing.T) {
				s := newStore(t, tg, freq.Options{Cluster: twoCalls})
				q := newQueue(t, s, 100)
				var got []freq.Recorded
				for _, d := range []string{"m1", "m1", "m2", "m1", "", ""} {
					got = append(got, recordOf(t, s, q, "t", d))
				}
				want := []freq.Recorded{{Previous: 0}, {Previous: 0, Duplicate: true}, {Previous: 1}, {Previous: 0, Duplicate: true}, {Previous: 2}, {Previous: 3}}
				for i := range got {
					if got[i].Previous != want[i].Previous || got[i].Duplicate != want[i].Duplicate || (got[i].RandomID == 0) != want[i].Duplicate && !twoCalls {
						t.Fatalf("call %d: %+v, want %+v", i, got[i], want[i])
					}
				}
				texts, peers, ids := entries(t, tg, q)
				if !slices.Equal(texts, []string{"0", "1", "2", "3"}) || !slices.Equal(peers, []string{"m1", "m2", "", ""}) {
					t.Fatalf("entries %v %v, want one reply per message with its answer", texts, peers)
				}
				for i := 1; i < len(ids); i++ {
					if ids[i] != ids[i-1]+1 {
						t.Fatalf("random_ids %v, want consecutive", ids)
					}
				}
				if r, _ := s.Seen(context.Background(), "t"); r != 4 {
					t.Fatalf("Seen %d, want 4", r)
				}
			})
		}
	})
}

// TestQueueOncePerMessage: Queue queues a reply once per dedupe key, and
// every time without one.
func TestQueueOncePerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		q := newQueue(t, s, 100)
		for i, c := range []struct {
			key    string
			queued bool
		}{{"a", true}, {"a", false}, {"b", true}, {"", true}, {"", true}} {
			if queued, err := s.Queue(ctx, q, c.key, "5", c.key); err != nil || queued != c.queued {
				t.Fatalf("call %d (%q): %v, %v; want %v", i, c.key, queued, err, c.queued)
			}
		}
		if texts, _, _ := entries(t, tg, q); len(texts) != 4 {
			t.Fatalf("%d entries, want 4", len(texts))
		}
	})
}

// TestEntryData: a reply's text may hold spaces (and anything else), read
// back whole with the caller's data; data with a space is refused, and
// nothing is counted or queued.
func TestEntryData(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		q := newQueue(t, s, 100)
		text := "  a reply\nof  lines "
		if queued, err := s.Queue(ctx, q, "k", text, "1,-2,3"); err != nil || !queued {
			t.Fatalf("Queue: %v, %v", queued, err)
		}
		texts, data, ids := entries(t, tg, q)
		if !slices.Equal(texts, []string{text}) || !slices.Equal(data, []string{"1,-2,3"}) || ids[0] == 0 {
			t.Fatalf("entries %q %q %v, want the text and data as given", texts, data, ids)
		}
		if _, err := s.Queue(ctx, q, "k2", "x", "a b"); !errors.Is(err, freq.ErrInvalid) {
			t.Fatalf("Queue with data holding a space: %v, want ErrInvalid", err)
		}
		if _, err := s.Record(ctx, &freq.Message{Text: "t", Dedupe: "k3", Queue: q, Data: "a b"}); !errors.Is(err, freq.ErrInvalid) {
			t.Fatalf("Record with data holding a space: %v, want ErrInvalid", err)
		}
		if texts, _, _ := entries(t, tg, q); len(texts) != 1 {
			t.Fatalf("%d entries after the refusals, want 1", len(texts))
		}
		if n, err := s.Seen(ctx, "t"); err != nil || n != 0 {
			t.Fatalf("the refused Record counted: %d, %v", n, err)
		}
		for _, bad := range []string{"", "d", "d 1", "d 1 2", "d x 2 t", "d 1 0 t", "d 99999999999 1 t"} {
			if _, _, _, _, err := freq.ParseEntry(bad); err == nil {
				t.Errorf("ParseEntry(%q) read it", bad)
			}
		}
	})
}

// TestRecordFull: a full queue refuses a new message with ErrFull and, in
// one script, counts nothing; the length is read rarely but never let past
// the maximum.
func TestRecordFull(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		q := newQueue(t, s, 10)
		for i := range 10 {
			recordOf(t, s, q, "t", fmt.Sprint("m", i))
		}
		_, err := s.Record(ctx, &freq.Message{Text: "t", Dedupe: "m10", Queue: q})
		twoCalls := tg.Kind == redistest.Cluster
		if !errors.Is(err, freq.ErrFull) || !strings.Contains(err.Error(), "10 entries") || errors.Is(err, freq.ErrNotQueued) != twoCalls {
			t.Fatalf("Record into a full queue: %v, want ErrFull naming 10 entries (and ErrNotQueued on a cluster)", err)
		}
		if n, _ := s.Seen(ctx, "t"); twoCalls != (n == 11) {
			t.Fatalf("Seen %d after the refusal, want 10 (11 on a cluster: counted, not queued)", n)
		}
		if r := recordOf(t, s, q, "t", "m3"); !r.Duplicate || r.Previous != 3 {
			t.Fatalf("a recorded message again: %+v, want 3 as a duplicate", r)
		}
		// Room again: the next message is queued.
		if err := tg.Client.XTrimMaxLen(ctx, q.Stream(), 5).Err(); err != nil {
			t.Fatal(err)
		}
		if r := recordOf(t, s, q, "t", "m10"); r.Previous != 10 || r.Duplicate != twoCalls || r.RandomID == 0 {
			t.Fatalf("once there is room: %+v, want 10 and a reply queued (a duplicate on a cluster: counted before)", r)
		}
	})
}

// TestRandomIDAfterGoingBack: a store gone back in time (its queue's keys
// as they were before the last replies: a restored snapshot) gives no
// random_id the instances saw given out since: it moves to a new epoch at
// a random point; an instance that saw the newer ids tells it.
func TestRandomIDAfterGoingBack(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		a, b := newQueue(t, s, 1000), newQueue(t, s, 1000) // two instances' views of one queue
		recordOf(t, s, a, "t", "m0")
		prefix, _, _ := strings.Cut(a.Stream(), "o:{")
		keys := redistest.Keys(t, tg.Client, prefix+"o:")
		snapshot := map[string]string{}
		for _, k := range keys {
			snapshot[k] = tg.Client.Dump(ctx, k).Val()
		}
		var seen []int32
		for i := range 10 {
			q := a
			if i%2 == 1 {
				q = b
			}
			seen = append(seen, recordOf(t, s, q, "t", fmt.Sprint("m", i+1)).RandomID)
		}
		for _, k := range keys { // the snapshot restored
			if err := tg.Client.RestoreReplace(ctx, k, 0, snapshot[k]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 10 {
			q := b
			if i%2 == 1 {
				q = a
			}
			if id := recordOf(t, s, q, "t", fmt.Sprint("n", i)).RandomID; slices.Contains(seen, id) {
				t.Fatalf("random_id %d given out again after the store went back; seen before: %v", id, seen)
			}
		}
	}, redistest.Real, redistest.Cluster) // miniredis's RESTORE of a hash is not Redis's
}

// TestSequenceOutlivesItsState: a community quiet past its state hashes
// (expired) goes on after the block its sequence key reserved, never
// before.
func TestSequenceOutlivesItsState(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		q := newQueue(t, s, 1000)
		first := recordOf(t, s, q, "t", "m0").RandomID
		fresh := newQueue(t, s, 1000) // an instance that saw none of it
		for _, k := range []string{q.Stream() + ":s0", q.Stream() + ":s1"} {
			tg.Client.Del(ctx, k)
		}
		next := recordOf(t, s, fresh, "t", "m1").RandomID
		if d := uint32(next) - uint32(first); d != 65536 {
			t.Fatalf("after the state expired: %d, %d after %d; want the id after the reserved block (65536)", next, d, first)
		}
	})
}

// TestLayoutVersion: Load writes the layout's version and bucket bits on a
// fresh Redis and reads them after; it refuses the markers of layouts 1
// and 2, another version, another k, or a development build's marker, naming both.
func TestLayoutVersion(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{})
		for range 2 {
			if err := s.Load(ctx); err != nil {
				t.Fatal(err)
			}
		}
		prefix, _, _ := strings.Cut(s.Keys("x")[0], "f:{")
		marker := prefix + "f:layout"
		if v := tg.Client.Get(ctx, marker).Val(); v != "3:11" {
			t.Fatalf("marker %q, want 3:11", v)
		}
		// A Store of another k finds the marker of this one.
		other := mustNew(t, tg.Client, freq.Options{Prefix: prefix, BucketBits: 12})
		if err := other.Load(ctx); !errors.Is(err, freq.ErrLayout) || !strings.Contains(err.Error(), `layout 3 with 11 bucket bits; this build reads layout 3 with 12 bucket bits ("3:12") only`) {
			t.Errorf("k 12 on k 11's keys: %v, want ErrLayout naming both", err)
		}
		for v, want := range map[string]string{
			"1764300000": "development build",
			"1":          `layout 1 (a key per text, never released); this build reads layout 3 with 11 bucket bits ("3:11") only`,
			"2:11":       `layout 2 (a reply's entry in a field per part, never released); this build reads layout 3`,
			"4:11":       `layout "4:11"; this build reads layout 3`,
		} {
			tg.Client.Set(ctx, marker, v, 0)
			err := s.Load(ctx)
			if !errors.Is(err, freq.ErrLayout) || !strings.Contains(err.Error(), want) {
				t.Errorf("marker %s: %v, want ErrLayout saying %q", v, err, want)
			}
			if got := tg.Client.Get(ctx, marker).Val(); got != v {
				t.Errorf("marker %s: now %q, want it untouched", v, got)
			}
		}
		tg.Client.Del(ctx, marker)
	})
}

var _ redis.Scripter = (*redis.Client)(nil)
