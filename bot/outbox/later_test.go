package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestLaterKeepsRetryStateAcrossInstances: a reply set aside leaves the
// stream (its head is trimmed, not pinned), is handed out to no one before
// it is due, then to one instance at a time with its retry state; when
// that instance dies with it, another takes it over after ClaimAfter; Done
// removes it for good.
func TestLaterKeepsRetryStateAcrossInstances(t *testing.T) {
	t.Parallel()
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		opts := outbox.Options{ClaimAfter: time.Second}
		a := newOutbox(t, tg, prefix, "a", opts)
		b := newOutbox(t, tg, prefix, "b", opts)
		addReplies(t, a, 1, 2)
		got, err := a.Take(ctx, group, 2, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("Take = %d, %v; want 2", len(got), err)
		}
		r := got[0]
		r.Tries, r.Unknown, r.Due = 3, 1, time.Now().Add(300*time.Millisecond)
		if _, err := a.Later(ctx, group, r); err != nil {
			t.Fatal(err)
		}
		if err := a.Done(ctx, group, got[1].ID); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("stream holds %d entries after one was set aside and one done, want 0", n)
		}
		if n, err := a.Len(ctx, group); err != nil || n != 1 {
			t.Errorf("Len = %d, %v; want 1 (the reply set aside)", n, err)
		}
		// Done's reading counts the reply set aside, with its age: a reply
		// VK keeps refusing must not look fresh (VkcounterRepliesWaiting).
		waited := time.Since(r.Queued)
		if s := a.Stats(group); s.Length != 1 || s.Oldest < waited {
			t.Errorf("Stats = %+v, want length 1 and the oldest at least %v old (the reply set aside)", s, waited)
		}
		if early, err := b.Take(ctx, group, 5, 0); err != nil || len(early) != 0 {
			t.Fatalf("Take before it is due = %d, %v; want none", len(early), err)
		}
		var taken []outbox.Entry
		eventually.True(t, 5*time.Second, "the reply handed out once due", func() bool {
			taken, err = b.Take(ctx, group, 5, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(taken) > 0
		})
		e := taken[0]
		if len(taken) != 1 || !e.Parked() || e.Tries != 3 || e.Unknown != 1 || e.PeerID != r.PeerID || e.RandomID != r.RandomID ||
			e.Message != r.Message || e.QuoteCMID != r.QuoteCMID || !e.Queued.Equal(r.Queued) {
			t.Fatalf("handed out %+v, want %+v with its retry state", taken, r)
		}
		if again, err := a.Take(ctx, group, 5, 0); err != nil || len(again) != 0 {
			t.Fatalf("a second Take while b sends it = %d, %v; want none", len(again), err)
		}
		// b dies with it: a takes it over once ClaimAfter has passed.
		eventually.True(t, 5*time.Second, "the reply taken over", func() bool {
			taken, err = a.Take(ctx, group, 5, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(taken) > 0
		})
		if taken[0].Tries != 3 {
			t.Errorf("taken over with %d tries, want 3", taken[0].Tries)
		}
		if err := a.Done(ctx, group, taken[0].ID); err != nil {
			t.Fatal(err)
		}
		if n, err := a.Len(ctx, group); err != nil || n != 0 {
			t.Errorf("Len after Done = %d, %v; want 0", n, err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestLaterKeepsAFloodedPeersNewestReplies: at most FloodKeep replies of
// a peer under flood control are kept; the oldest beyond are dropped and
// returned, another peer's are not touched.
func TestLaterKeepsAFloodedPeersNewestReplies(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{FloodKeep: 3})
		for range 5 {
			if err := o.Add(ctx, reply(1)); err != nil {
				t.Fatal(err)
			}
		}
		addReplies(t, o, 2, 2)
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 6 {
			t.Fatalf("Take = %d, %v; want 6", len(got), err)
		}
		due := time.Now().Add(time.Hour)
		var dropped []outbox.Entry
		for _, r := range got { // one at a time, as refusals come
			r.Flood, r.Due = 1, due
			d, err := o.Later(ctx, group, r)
			if err != nil {
				t.Fatal(err)
			}
			dropped = append(dropped, d...)
		}
		if len(dropped) != 2 || dropped[0].RandomID != got[0].RandomID || dropped[1].RandomID != got[1].RandomID {
			t.Fatalf("dropped %+v, want the peer's two oldest", dropped)
		}
		if n, err := o.Len(ctx, group); err != nil || n != 4 {
			t.Errorf("Len = %d, %v; want 4: the peer's 3 newest and the other peer's", n, err)
		}
	}, redistest.Mini, redistest.Real)
}
