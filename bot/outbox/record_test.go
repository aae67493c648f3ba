package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

// newRecorder returns an outbox under prefix recording with a freq.Store
// on tg's client, and the Store; it records in two calls on a cluster, or
// when twoCalls is given.
func newRecorder(t *testing.T, tg *redistest.Target, prefix, consumer string, opts outbox.Options, twoCalls ...bool) (*outbox.Outbox, *freq.Store) {
	t.Helper()
	st, err := freq.New(tg.Client, freq.Options{Prefix: prefix, Cluster: tg.Kind == redistest.Cluster || len(twoCalls) > 0})
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = st
	return newOutbox(t, tg, prefix, consumer, opts), st
}

// record records the message key of peer with r, as the bot does: the
// dedupe key and the reply key derive from the message key.
func record(t *testing.T, o *outbox.Outbox, text string, peer int) (int64, bool, error) {
	t.Helper()
	e := reply(peer)
	e.Message, e.Key = "", fmt.Sprint(peer, ":c1")
	return o.Record(context.Background(), text, "msg/"+e.Key, e)
}

// TestRecordOncePerMessage: Record counts a message and stores its reply,
// with the count as its text, once however often and however
// concurrently the message comes, in one script on a single server and in
// two calls on a cluster.
func TestRecordOncePerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o, _ := newRecorder(t, tg, redistest.Prefix(t), "a", outbox.Options{})
		for peer := 1; peer <= 3; peer++ {
			res := together.Run(t, 20, func(int) ([2]int64, error) {
				previous, duplicate, err := record(t, o, "t", peer)
				d := int64(0)
				if duplicate {
					d = 1
				}
				return [2]int64{previous, d}, err
			})
			firsts := 0
			for _, r := range res {
				if r[0] != int64(peer-1) {
					t.Fatalf("message %d answered %d, want %d", peer, r[0], peer-1)
				}
				firsts += int(1 - r[1])
			}
			if firsts != 1 {
				t.Fatalf("message %d counted %d times, want once", peer, firsts)
			}
		}
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 3 {
			t.Fatalf("Take = %+v, %v; want one reply per message", got, err)
		}
		sequential(t, got)
		for i, e := range got {
			want := reply(i + 1)
			want.ID, want.Message, want.RandomID = e.ID, fmt.Sprint(i), e.RandomID
			if e != want {
				t.Errorf("reply %d: %+v, want %+v", i, e, want)
			}
		}
	})
}

// TestRecordAfterCountOnly: a message counted whose reply was not stored
// (two calls, as on a cluster, the second failed) gets its reply stored,
// with the count's answer, when it comes again, and is not counted twice.
func TestRecordAfterCountOnly(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o, st := newRecorder(t, tg, redistest.Prefix(t), "a", outbox.Options{}, true)
		for _, dedupe := range []string{"msg/9:c1", "msg/1:c1"} {
			if _, _, err := st.Count(ctx, "t", dedupe); err != nil {
				t.Fatal(err)
			}
		}
		previous, duplicate, err := record(t, o, "t", 1)
		if err != nil || previous != 1 || !duplicate {
			t.Fatalf("Record = %d, %v, %v; want 1 as a duplicate", previous, duplicate, err)
		}
		if previous, duplicate, err := record(t, o, "t", 2); err != nil || previous != 2 || duplicate {
			t.Fatalf("next message: %d, %v, %v; want 2", previous, duplicate, err)
		}
		got, _ := o.Take(ctx, group, 10, 0)
		if len(got) != 2 || got[0].Message != "1" || got[1].Message != "2" {
			t.Fatalf("replies %+v, want 1 and 2", got)
		}
	})
}

// TestRecordFull: a full outbox refuses a new message with ErrFull; in one
// script nothing is counted, in two calls the message is counted
// (ErrNotStored) and answered with the same number once there is room. A
// message whose reply is stored already is answered as ever.
func TestRecordFull(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o, _ := newRecorder(t, tg, redistest.Prefix(t), "a", outbox.Options{MaxLen: 1})
		if _, _, err := record(t, o, "t", 1); err != nil {
			t.Fatal(err)
		}
		_, _, err := record(t, o, "t", 2)
		if !errors.Is(err, outbox.ErrFull) || errors.Is(err, outbox.ErrNotStored) != (tg.Kind == redistest.Cluster) {
			t.Fatalf("Record into a full outbox: %v; want ErrFull, and ErrNotStored on a cluster", err)
		}
		if previous, duplicate, err := record(t, o, "t", 1); err != nil || previous != 0 || !duplicate {
			t.Fatalf("the stored message again: %d, %v, %v; want 0 as a duplicate", previous, duplicate, err)
		}
		got, _ := o.Take(ctx, group, 10, 0)
		o.Done(ctx, group, ids(got)...)
		previous, _, err := record(t, o, "t", 2)
		if err != nil || previous != 1 {
			t.Fatalf("the refused message once there is room: %d, %v; want 1", previous, err)
		}
		if n, _ := o.Len(ctx, group); n != 1 {
			t.Fatalf("length %d, want the second reply alone", n)
		}
	})
}

// TestOnceForOneToTwoPeriods: a message's reply is remembered for at
// least OnceFor after it was queued and at most twice as long (a
// period's once-hash expires at the end of the next period).
func TestOnceForOneToTwoPeriods(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	ctx := context.Background()
	o := newOutbox(t, tg, redistest.Prefix(t), "a", outbox.Options{OnceFor: 10 * time.Second})
	r := reply(1)
	r.Key = "1:c1"
	// The beginning of an even period, later than the server's clock (its
	// TTLs follow the clock forward only).
	begin := time.Unix((time.Now().Unix()/20+100)*20, 0)
	for _, c := range []struct {
		after time.Duration
		len   int64
	}{{0, 1}, {19 * time.Second, 1}, {21 * time.Second, 2}} {
		tg.Mini.SetTime(begin.Add(c.after)) // TTLs follow (ClockTTL)
		if err := o.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
		if n, _ := o.Len(ctx, group); n != c.len {
			t.Fatalf("%v after the first: length %d, want %d", c.after, n, c.len)
		}
	}
}
