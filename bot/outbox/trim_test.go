package outbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/testclock"
)

// TestDoneInOrderTrims: a batch finished in order leaves an empty stream,
// trimmed rather than deleted from: Redis records no deleted entry
// (XINFO STREAM max-deleted-entry-id, which Redis 7.0 and later report;
// Redis 6.2 and miniredis do not, and the check is left out there).
func TestDoneInOrderTrims(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		addReplies(t, o, 1, 5)
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 5 {
			t.Fatalf("Take = %v, %v; want 5 replies", got, err)
		}
		if err := o.Done(ctx, group, ids(got[:3])...); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 2 {
			t.Errorf("length %d after the first 3 are done, want 2", n)
		}
		if err := o.Done(ctx, group, ids(got[3:])...); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("length %d after all are done, want 0", n)
		}
		info, err := tg.Client.XInfoStream(ctx, prefix+"o:{42}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.MaxDeletedEntryID != "" && info.MaxDeletedEntryID != "0-0" {
			t.Errorf("max-deleted-entry-id %v, want 0-0: entries were deleted, not trimmed", info.MaxDeletedEntryID)
		}
		if st := o.Stats(group); st.Length != 0 || st.Oldest != 0 {
			t.Errorf("Stats = %+v, want an empty outbox", st)
		}
	})
}

// TestDoneOutOfOrder: an entry finished while an older one is still
// pending (with another instance here) stays in the stream, counted in its
// length, but is never handed out again, by a read, a takeover or a
// recovery; once the older one is finished, both are gone.
func TestDoneOutOfOrder(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		// ClaimAfter passes when the test says (clock, idleFor): fast's
		// first Take reads reply 2 rather than taking reply 1 over.
		var clock testclock.Clock
		opts := outbox.Options{ClaimAfter: time.Minute, Clock: clock.Now}
		slow := newOutbox(t, tg, prefix, "slow", opts)
		fast := newOutbox(t, tg, prefix, "fast", opts)
		addReplies(t, slow, 1, 2)
		older, err := slow.Take(ctx, group, 1, 0)
		if err != nil || len(older) != 1 || older[0].PeerID != 1 {
			t.Fatalf("slow Take = %+v, %v; want reply 1", older, err)
		}
		newer, err := fast.Take(ctx, group, 1, 0)
		if err != nil || len(newer) != 1 || newer[0].PeerID != 2 {
			t.Fatalf("fast Take = %+v, %v; want reply 2", newer, err)
		}
		if err := fast.Done(ctx, group, newer[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 2 {
			t.Errorf("length %d while reply 1 is pending, want 2 (reply 2 finished, kept)", n)
		}
		if st := fast.Stats(group); st.Length != 2 {
			t.Errorf("Stats = %+v, want length 2", st)
		}
		clock.Advance(opts.ClaimAfter) // past ClaimAfter: fast takes reply 1 over from slow
		idleFor(t, tg, prefix+"o:{42}", opts.ClaimAfter)
		got, err := fast.Take(ctx, group, 10, 0)
		for err == nil && len(got) > 0 {
			if slices.Contains(peers(got), 2) {
				t.Fatalf("finished reply 2 handed out again: %+v", got)
			}
			older = append(older, got...)
			got, err = fast.Take(ctx, group, 10, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(peers(older), []int{1, 1}) {
			t.Errorf("handed out %v, want reply 1 twice (taken, then taken over)", peers(older))
		}
		if err := fast.Done(ctx, group, older[1].ID); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("length %d once reply 1 is finished, want 0", n)
		}
		if got, err := slow.Take(ctx, group, 10, 0); err != nil || len(got) != 0 {
			t.Errorf("slow Take at the end = %+v, %v; want nothing", got, err)
		}
	})
}

// TestUndeliveredEntriesStay: the trim never removes an entry the group
// has not delivered yet, whether an entry is pending or not.
func TestUndeliveredEntriesStay(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		a := newOutbox(t, tg, prefix, "a", outbox.Options{})
		b := newOutbox(t, tg, prefix, "b", outbox.Options{})
		addReplies(t, a, 1, 6)
		first, _ := a.Take(ctx, group, 1, 0)
		second, _ := b.Take(ctx, group, 2, 0)
		if !slices.Equal(peers(first), []int{1}) || !slices.Equal(peers(second), []int{2, 3}) {
			t.Fatalf("Takes = %v, %v; want [1], [2 3]", peers(first), peers(second))
		}
		if err := b.Done(ctx, group, ids(second)...); err != nil {
			t.Fatal(err)
		}
		if err := a.Done(ctx, group, ids(first)...); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 3 {
			t.Errorf("length %d, want 3: the replies not read yet", n)
		}
		addReplies(t, a, 7, 8)
		rest, err := b.Take(ctx, group, 10, 0)
		if err != nil || !slices.Equal(peers(rest), []int{4, 5, 6, 7, 8}) {
			t.Fatalf("Take = %v, %v; want the 5 replies not read yet", peers(rest), err)
		}
		if err := b.Done(ctx, group, ids(rest)...); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("length %d at the end, want 0", n)
		}
	})
}

// TestTrimAtIDCarries: the first id after the last delivered one is
// computed exactly, with carries, where Lua numbers are not exact: an
// entry right after it is kept.
func TestTrimAtIDCarries(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		key := prefix + "o:{42}"
		all := []string{"7-9", "7-10", "7-18446744073709551615", "8-0"}
		for i, id := range all {
			err := tg.Client.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: id,
				Values: rawEntry(42, i+1, "1")}).Err()
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, id := range all {
			got, err := o.Take(ctx, group, 1, 0)
			if err != nil || len(got) != 1 || got[0].ID != id {
				t.Fatalf("Take = %+v, %v; want entry %s", got, err, id)
			}
			if err := o.Done(ctx, group, id); err != nil {
				t.Fatal(err)
			}
			if n := streamLen(t, tg, prefix); n != int64(len(all)-1-i) {
				t.Fatalf("length %d after %s is done, want %d", n, id, len(all)-1-i)
			}
		}
	})
}

// TestMixedFleet: during a rolling upgrade, instances of the previous
// version finish entries with XACK and XDEL (its done script) while new
// ones trim: every reply is handed out once, and the stream ends empty.
func TestMixedFleet(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		key := prefix + "o:{42}"
		o := newOutbox(t, tg, prefix, "new", outbox.Options{})
		addReplies(t, o, 1, 6)
		oldRead := func(n int64) []string {
			t.Helper()
			s, err := tg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: outbox.ConsumerGroup, Consumer: "old",
				Streams: []string{key, ">"}, Count: n, Block: -1}).Result()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range s[0].Messages {
				out = append(out, m.ID)
			}
			return out
		}
		oldDone := func(id string) {
			t.Helper()
			err := tg.Client.Eval(ctx, "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) return redis.call('XDEL', KEYS[1], ARGV[2])",
				[]string{key}, outbox.ConsumerGroup, id).Err()
			if err != nil {
				t.Fatal(err)
			}
		}
		byOld := oldRead(2) // replies 1 and 2
		byNew, err := o.Take(ctx, group, 2, 0)
		if err != nil || !slices.Equal(peers(byNew), []int{3, 4}) {
			t.Fatalf("Take = %v, %v; want [3 4]", peers(byNew), err)
		}
		// 4 is finished while 1-3 are pending, then 1 by the old instance,
		// then 3 while 2 is pending.
		if err := o.Done(ctx, group, byNew[1].ID); err != nil {
			t.Fatal(err)
		}
		oldDone(byOld[0])
		if err := o.Done(ctx, group, byNew[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 5 {
			t.Errorf("length %d, want 5: 2 pending, 3 and 4 finished behind it, 5 and 6 unread", n)
		}
		oldDone(byOld[1]) // 2: the old version does not trim, 3 and 4 stay
		if more := oldRead(10); len(more) != 2 {
			t.Fatalf("the old instance read %v, want the 2 replies unread (5 and 6)", more)
		} else {
			oldDone(more[0])
			byOld = append(byOld, more...)
		}
		if got, err := o.Take(ctx, group, 10, 0); err != nil || len(got) != 0 {
			t.Fatalf("new Take = %v, %v; want nothing: every reply was handed out", peers(got), err)
		}
		if err := o.Add(ctx, reply(7)); err != nil {
			t.Fatal(err)
		}
		last, err := o.Take(ctx, group, 10, 0)
		if err != nil || !slices.Equal(peers(last), []int{7}) {
			t.Fatalf("new Take = %v, %v; want [7]", peers(last), err)
		}
		oldDone(byOld[3]) // 6
		if err := o.Done(ctx, group, last[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("length %d at the end, want 0", n)
		}
	})
}

// TestReleaseLeavesTheCopies: entries handed back are acknowledged and
// trimmed; the stream holds their copies only, which are read again.
func TestReleaseLeavesTheCopies(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		closing := newOutbox(t, tg, prefix, "closing", outbox.Options{})
		live := newOutbox(t, tg, prefix, "live", outbox.Options{})
		addReplies(t, closing, 1, 3)
		if got, _ := closing.Take(ctx, group, 2, 0); len(got) != 2 {
			t.Fatalf("Take = %+v; want 2 replies", got)
		}
		if n, err := closing.Release(ctx, group); err != nil || n != 2 {
			t.Fatalf("Release = %d, %v; want 2", n, err)
		}
		if n := streamLen(t, tg, prefix); n != 3 {
			t.Errorf("length %d after Release, want 3: reply 3 and the 2 copies", n)
		}
		got, err := live.Take(ctx, group, 10, 0)
		if err != nil || !slices.Equal(peers(got), []int{3, 1, 2}) {
			t.Fatalf("Take after Release = %v, %v; want [3 1 2]", peers(got), err)
		}
		if err := live.Done(ctx, group, ids(got)...); err != nil {
			t.Fatal(err)
		}
		if n := streamLen(t, tg, prefix); n != 0 {
			t.Errorf("length %d at the end, want 0", n)
		}
	})
}
