package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/testclock"
	"github.com/vkcounter/vkcounter/internal/together"
)

// TestRandomIDKeptByEveryRetry: a reply keeps the random_id it was stored
// with when the message comes again, when the instance holding it dies
// (kill -9: it never finishes it) and another takes it over, and when a
// stopping instance hands it back and another sends it.
func TestRandomIDKeptByEveryRetry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		var clock testclock.Clock
		opts := outbox.Options{ClaimAfter: time.Minute, Clock: clock.Now}
		dead, _ := newRecorder(t, tg, prefix, "dead", opts)
		alive, _ := newRecorder(t, tg, prefix, "alive", opts)
		for _, o := range []*outbox.Outbox{dead, alive, dead} { // the message three times
			if _, _, err := record(t, o, "t", 1); err != nil {
				t.Fatal(err)
			}
		}
		held, err := dead.Take(ctx, group, 10, 0)
		if err != nil || len(held) != 1 || held[0].RandomID == 0 {
			t.Fatalf("Take = %+v, %v; want the one reply, with a random_id", held, err)
		}
		want := held[0].RandomID

		clock.Advance(opts.ClaimAfter) // the dead instance's hold is older than ClaimAfter
		idleFor(t, tg, prefix+"o:{42}", opts.ClaimAfter)
		claimed, err := alive.Take(ctx, group, 10, 0)
		if err != nil || len(claimed) != 1 || claimed[0].RandomID != want {
			t.Fatalf("taken over: %+v, %v; want the reply with random_id %d", claimed, err, want)
		}
		if n, err := alive.Release(ctx, group); err != nil || n != 1 {
			t.Fatalf("hand-back: %d, %v; want 1", n, err)
		}
		again, err := dead.Take(ctx, group, 10, 0)
		if err != nil || len(again) != 1 || again[0].RandomID != want || again[0].ID == claimed[0].ID {
			t.Fatalf("after the hand-back: %+v, %v; want a new entry with random_id %d", again, err, want)
		}
		if _, _, err := record(t, alive, "t", 1); err != nil {
			t.Fatal(err)
		}
		if n, _ := alive.Len(ctx, group); n != 1 {
			t.Fatalf("length %d after the message came again, want 1", n)
		}
	})
}

// TestInstancesShareOneSequence: instances storing replies of one
// community at once give out one sequence: every reply's random_id is
// distinct, and together they are consecutive.
func TestInstancesShareOneSequence(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		a, _ := newRecorder(t, tg, prefix, "a", outbox.Options{})
		// The second instance has a client and connections of its own.
		b := outbox.New(tg.NoRetryClient(t, ""), outbox.Options{Prefix: prefix, Consumer: "b"})
		t.Cleanup(func() { b.Close() })
		together.Run(t, 100, func(i int) (struct{}, error) {
			if i%2 == 0 {
				_, _, err := record(t, a, fmt.Sprint("t", i), i)
				return struct{}{}, err
			}
			e := reply(i)
			e.Key = fmt.Sprint(i, ":c1")
			return struct{}{}, b.Add(ctx, e)
		})
		got, err := a.Take(ctx, group, 200, 0)
		if err != nil || len(got) != 100 {
			t.Fatalf("Take = %d replies, %v; want 100", len(got), err)
		}
		sequential(t, got)
	})
}

// TestSequenceAfterDataLoss: a Redis that lost its data (FLUSHALL, or a
// restart without persistence) does not begin the sequence again where it
// began: each new sequence begins at a random point.
func TestSequenceAfterDataLoss(t *testing.T) {
	lose := map[redistest.Kind]func(t *testing.T, tg *redistest.Target, prefix string){
		redistest.Mini: func(t *testing.T, tg *redistest.Target, _ string) { tg.Mini.FlushAll() },
		redistest.Real: func(t *testing.T, tg *redistest.Target, _ string) {
			if err := tg.Client.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		// The cluster is shared with other tests: the test's own keys are
		// deleted, which is what FLUSHALL does to them.
		redistest.Cluster: func(t *testing.T, tg *redistest.Target, prefix string) {
			for _, k := range redistest.Keys(t, tg.Client, prefix) {
				if err := tg.Client.Del(context.Background(), k).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	check := func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		var firsts []int32
		for range 5 {
			if err := o.Init(ctx, group); err != nil { // the stream and group, lost too
				t.Fatal(err)
			}
			addReplies(t, o, 1, 2)
			var got []int64
			for _, m := range tg.Client.XRange(ctx, prefix+"o:{42}", "-", "+").Val() {
				_, id, _, _, err := freq.ParseEntry(m.Values[freq.EntryField].(string))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, int64(id))
			}
			if len(got) != 2 || got[0] == 0 || got[1] != got[0]+1 {
				t.Fatalf("random_ids stored %v, want two in a row", got)
			}
			if slices.Contains(firsts, int32(got[0])) {
				t.Fatalf("after losing its data the sequence began again at %d; it began at %v before", got[0], firsts)
			}
			firsts = append(firsts, int32(got[0]))
			lose[tg.Kind](t, tg, prefix)
			if keys := redistest.Keys(t, tg.Client, prefix); len(keys) != 0 {
				t.Fatalf("%v outlived the loss of the data", keys)
			}
		}
	}
	t.Run(string(redistest.Mini), func(t *testing.T) { check(t, redistest.Open(t, redistest.Mini)) })
	// FLUSHALL on a server of the test's own: the shared one is never flushed.
	t.Run(string(redistest.Real), func(t *testing.T) { check(t, redistest.OwnServer(t)) })
	t.Run(string(redistest.Cluster), func(t *testing.T) { check(t, redistest.Open(t, redistest.Cluster)) })
}

// TestSequenceBehindWhatASenderRead: a reply whose Record answer was lost
// (here: stored by another instance) and that this instance's sender read
// moves the instance's mark on, so that when the store's sequence goes
// back behind it (a promoted replica that missed the last writes; here:
// its keys put back as they were), the next reply begins a new epoch
// rather than take the random_id of the reply already sent.
func TestSequenceBehindWhatASenderRead(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		stored, _ := newRecorder(t, tg, prefix, "stored", outbox.Options{})
		sender, _ := newRecorder(t, tg, prefix, "sender", outbox.Options{})
		if _, _, err := record(t, stored, "t0", 1); err != nil {
			t.Fatal(err)
		}
		put := snapshot(t, tg, prefix+"o:{42}:s0", prefix+"o:{42}:s1", prefix+"o:{42}:rid")
		if _, _, err := record(t, stored, "t1", 2); err != nil { // the write the replica misses
			t.Fatal(err)
		}
		read, err := sender.Take(ctx, group, 10, 0)
		if err != nil || len(read) != 2 {
			t.Fatalf("Take = %+v, %v; want the two replies", read, err)
		}
		put() // the sequence goes back to before the second reply
		if _, _, err := record(t, sender, "t2", 3); err != nil {
			t.Fatal(err)
		}
		next, err := sender.Take(ctx, group, 10, 0)
		if err != nil || len(next) != 1 {
			t.Fatalf("Take = %+v, %v; want the new reply", next, err)
		}
		for _, r := range read {
			if next[0].RandomID == r.RandomID {
				t.Fatalf("the new reply took random_id %d, which the sender read given out already", r.RandomID)
			}
		}
	})
}

// snapshot returns a function that puts keys (hashes or strings, or
// absent) back as they are now.
func snapshot(t *testing.T, tg *redistest.Target, keys ...string) (put func()) {
	t.Helper()
	ctx := context.Background()
	hashes, strs := map[string]map[string]string{}, map[string]string{}
	for _, k := range keys {
		switch typ := tg.Client.Type(ctx, k).Val(); typ {
		case "hash":
			hashes[k] = tg.Client.HGetAll(ctx, k).Val()
		case "string":
			strs[k] = tg.Client.Get(ctx, k).Val()
		case "none":
		default:
			t.Fatalf("%s is a %s", k, typ)
		}
	}
	return func() {
		t.Helper()
		for _, k := range keys {
			if err := tg.Client.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
			var err error
			if h, ok := hashes[k]; ok {
				err = tg.Client.HSet(ctx, k, h).Err()
			} else if s, ok := strs[k]; ok {
				err = tg.Client.Set(ctx, k, s, 0).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
