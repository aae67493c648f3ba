package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/testclock"
	"github.com/vkcounter/vkcounter/internal/together"
)

const group = 42

func newOutbox(t *testing.T, tg *redistest.Target, prefix, consumer string, opts outbox.Options) *outbox.Outbox {
	t.Helper()
	opts.Prefix, opts.Consumer = prefix, consumer
	o := outbox.New(tg.Client, opts)
	t.Cleanup(func() { o.Close() })
	if err := o.Init(context.Background(), group); err != nil {
		t.Fatal(err)
	}
	return o
}

// reply is the reply to peer; its RandomID, which the outbox sets, is
// left 0.
func reply(peer int) outbox.Entry {
	return outbox.Entry{GroupID: group, PeerID: peer, Message: "3", Queued: time.UnixMilli(1764115200123),
		QuoteCMID: 40 + peer, ReplyTo: 70 + peer}
}

// nextRandomID is the random_id the outbox gives out after id.
func nextRandomID(id int32) int32 {
	id++ // from the maximum on to the minimum
	if id == 0 {
		id = 1
	}
	return id
}

// sequential fails t unless rs, in the order stored, carry random_ids
// one after the other from the community's sequence, none 0.
func sequential(t *testing.T, rs []outbox.Entry) {
	t.Helper()
	for i, r := range rs {
		if r.RandomID == 0 || i > 0 && r.RandomID != nextRandomID(rs[i-1].RandomID) {
			t.Fatalf("random_ids of the replies in order: %v, want consecutive ones, none 0", randomIDs(rs))
		}
	}
}

// randomIDs returns the random_ids of rs.
func randomIDs(rs []outbox.Entry) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.RandomID)
	}
	return out
}

// addReplies adds the replies to peers first to last, in order, with o.
func addReplies(t *testing.T, o *outbox.Outbox, first, last int) {
	t.Helper()
	for p := first; p <= last; p++ {
		if err := o.Add(context.Background(), reply(p)); err != nil {
			t.Fatal(err)
		}
	}
}

// streamLen returns the length of the outbox stream under prefix.
func streamLen(t *testing.T, tg *redistest.Target, prefix string) int64 {
	t.Helper()
	n, err := tg.Client.XLen(context.Background(), prefix+"o:{42}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// peers returns the peers of rs, in order.
func peers(rs []outbox.Entry) []int {
	var ps []int
	for _, r := range rs {
		ps = append(ps, r.PeerID)
	}
	return ps
}

// idleFor makes every entry pending in stream look idle for d to Redis,
// as d of waiting would, without the wait: each is claimed again by the
// consumer holding it (XCLAIM … IDLE, JUSTID: no delivery counted). The
// outbox's own clock (Options.Clock) is the test's to move.
func idleFor(t *testing.T, tg *redistest.Target, stream string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	pending, err := tg.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: outbox.ConsumerGroup,
		Start: "-", End: "+", Count: 10000}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if err := tg.Client.Do(ctx, "XCLAIM", stream, outbox.ConsumerGroup, p.Consumer, 0, p.ID,
			"IDLE", d.Milliseconds(), "JUSTID").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// idTime returns the time of Redis's clock a stream entry's id holds.
func idTime(t *testing.T, id string) time.Time {
	t.Helper()
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("stream id %q: %v", id, err)
	}
	return time.UnixMilli(n)
}

// ids returns the ids of rs.
func ids(rs []outbox.Entry) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestAddTakeDone(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		addReplies(t, o, 1, 3)
		got, err := o.Take(ctx, group, 2, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("Take = %v, %v; want 2 replies", got, err)
		}
		sequential(t, got)
		want := reply(1)
		want.ID, want.RandomID = got[0].ID, got[0].RandomID
		if got[0] != want || got[0].ID == "" {
			t.Errorf("first reply %+v, want %+v", got[0], want)
		}
		rest, _ := o.Take(ctx, group, 10, 0)
		if len(rest) != 1 || rest[0].PeerID != 3 {
			t.Fatalf("second Take = %+v, want the third reply", rest)
		}
		if more, _ := o.Take(ctx, group, 10, 0); len(more) != 0 {
			t.Fatalf("replies handed out twice: %+v", more)
		}
		if err := o.Done(ctx, group, got[0].ID, got[1].ID, rest[0].ID); err != nil {
			t.Fatal(err)
		}
		if n, err := o.Len(ctx, group); err != nil || n != 0 {
			t.Errorf("after Done: %d %v, want an empty outbox (acknowledged entries are deleted)", n, err)
		}
	})
}

// TestUnquotedReplyLeavesTheQuoteOut: a reply that quotes nothing is
// stored without the quote's fields (two pairs fewer in the stream) and
// comes back with both zero, beside a quoted one that keeps them.
func TestUnquotedReplyLeavesTheQuoteOut(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		plain, quoted := reply(1), reply(2)
		plain.QuoteCMID, plain.ReplyTo = 0, 0
		for _, e := range []outbox.Entry{plain, quoted} {
			if err := o.Add(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		stored, err := tg.Client.XRange(ctx, prefix+"o:{42}", "-", "+").Result()
		if err != nil || len(stored) != 2 {
			t.Fatalf("XRANGE = %v, %v; want 2 entries", stored, err)
		}
		for i, numbers := range []int{3, 5} {
			data, _, _, _, err := freq.ParseEntry(stored[i].Values[freq.EntryField].(string))
			if n := strings.Count(data, ",") + 1; err != nil || n != numbers {
				t.Errorf("entry %d's data %q (%v): %d numbers stored, want %d", i, data, err, n, numbers)
			}
		}
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("Take = %v, %v; want 2 replies", got, err)
		}
		for i, want := range []outbox.Entry{plain, quoted} {
			want.ID, want.RandomID = got[i].ID, got[i].RandomID
			if got[i] != want {
				t.Errorf("reply %d: %+v, want %+v", i, got[i], want)
			}
		}
	})
}

func TestTakeWaitsForNewReplies(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o := newOutbox(t, tg, redistest.Prefix(t), "a", outbox.Options{})
		type result struct {
			got []outbox.Entry
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := o.Take(ctx, group, 5, 5*time.Second)
			done <- result{got, err}
		}()
		// Once Take's read that waits is under way: the reply lands while
		// Redis blocks it or, rarely, just before; either way Take must
		// return it.
		eventually.True(t, 5*time.Second, "Take waits", func() bool { return o.Waiting() == 1 })
		if err := o.Add(ctx, reply(1)); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || len(r.got) != 1 {
			t.Fatalf("Take = %v, %v; want the reply added while it waited", r.got, r.err)
		}
	})
}

// TestStaleEntriesAreTakenOver: a consumer that took replies and died
// leaves them pending; another consumer takes them after ClaimAfter, while
// the consumer still holding its own entries does not get them twice.
func TestStaleEntriesAreTakenOver(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		// ClaimAfter passes when the test says (clock, idleFor): alive's
		// first Take reads reply 2 rather than taking reply 1 over, on a
		// machine however loaded.
		var clock testclock.Clock
		opts := outbox.Options{ClaimAfter: time.Minute, Clock: clock.Now}
		dead := newOutbox(t, tg, prefix, "dead", opts)
		alive := newOutbox(t, tg, prefix, "alive", opts)
		dead.Add(ctx, reply(1))
		alive.Add(ctx, reply(2))
		if got, _ := dead.Take(ctx, group, 1, 0); len(got) != 1 {
			t.Fatal("dead consumer took nothing")
		}
		held, _ := alive.Take(ctx, group, 1, 0) // alive holds reply 2, still sending it
		if len(held) != 1 {
			t.Fatal("alive consumer took nothing")
		}
		clock.Advance(opts.ClaimAfter) // both entries are now idle past ClaimAfter
		idleFor(t, tg, prefix+"o:{42}", opts.ClaimAfter)
		got, err := alive.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 1 || got[0].PeerID != 1 {
			t.Fatalf("Take after ClaimAfter = %+v, %v; want only the dead consumer's reply", got, err)
		}
		if alive.Redeliveries() != 1 {
			t.Errorf("redeliveries %d, want 1", alive.Redeliveries())
		}
	})
}

func TestFull(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o := newOutbox(t, tg, redistest.Prefix(t), "a", outbox.Options{MaxLen: 2})
		addReplies(t, o, 1, 2)
		if err := o.Add(ctx, reply(3)); !errors.Is(err, outbox.ErrFull) {
			t.Fatalf("third Add = %v, want ErrFull", err)
		}
		if n, _ := o.Len(ctx, group); n != 2 {
			t.Errorf("length %d after a refused Add, want 2", n)
		}
	})
}

// TestLostStreamIsRecreated: a Redis without persistence restarted (or the
// key deleted) loses the consumer group; Take recreates it.
func TestLostStreamIsRecreated(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		if err := tg.Client.Del(ctx, prefix+"o:{42}").Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := o.Take(ctx, group, 1, 0); err != nil || len(got) != 0 {
			t.Fatalf("Take on a lost stream = %v, %v; want nothing and no error", got, err)
		}
		o.Add(ctx, reply(1))
		if got, err := o.Take(ctx, group, 1, 0); err != nil || len(got) != 1 {
			t.Fatalf("Take after recreation = %v, %v", got, err)
		}
	})
}

func TestUndecodableEntryIsDeleted(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		tg.Client.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "o:{42}", Values: []any{"g", "x"}})
		o.Add(ctx, reply(1))
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 1 || got[0].PeerID != 1 {
			t.Fatalf("Take = %+v, %v; want the good reply only", got, err)
		}
		if n, _ := o.Len(ctx, group); n != 1 {
			t.Errorf("length %d, want 1: the bad entry deleted, the good one pending", n)
		}
	})
}

// TestStats: Stats answers from the last reading, taken by Init and by
// Take while entries come and go (at most every StatsEvery), and makes no
// Redis call itself, so it answers at once while Redis is unreachable.
func TestStats(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		via := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
		defer via.Close()
		var clock testclock.Clock
		o := outbox.New(via, outbox.Options{Prefix: prefix, Consumer: "a", StatsEvery: time.Hour, Clock: clock.Now})
		if st := o.Stats(group); st.Age != -1 {
			t.Errorf("Stats before any reading = %+v, want Age -1", st)
		}
		if err := o.Init(ctx, group); err != nil {
			t.Fatal(err)
		}
		if st := o.Stats(group); st.Length != 0 || st.Age < 0 || st.Age > time.Minute {
			t.Errorf("Stats after Init = %+v, want an empty, fresh reading", st)
		}
		o.Add(ctx, reply(1))
		o.Add(ctx, reply(2))
		clock.Advance(time.Hour) // StatsEvery passed: Take reads again
		got, err := o.Take(ctx, group, 1, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Take = %v, %v", got, err)
		}
		st := o.Stats(group)
		if st.Length != 2 || st.Oldest < time.Hour || st.Oldest > time.Hour+time.Minute || st.Age > time.Minute {
			t.Errorf("Stats after Take = %+v; want two entries, the oldest about an hour old, read now", st)
		}
		proxy.Cut()
		done := make(chan outbox.Stats)
		go func() { done <- o.Stats(group) }()
		select {
		case st := <-done:
			if st.Length != 2 {
				t.Errorf("Stats with Redis unreachable = %+v, want the last reading", st)
			}
		case <-time.After(time.Second):
			t.Fatal("Stats waited for Redis")
		}
		clock.Advance(time.Hour)
		o.Take(ctx, group, 1, 0) // fails: the reading stays, and ages
		if st2 := o.Stats(group); st2.Length != 2 || st2.Age < st.Age+time.Hour {
			t.Errorf("Stats after a failed refresh = %+v, want the old reading, older than %v", st2, st.Age)
		}
	}, redistest.Mini, redistest.Real) // a proxy in front of one cluster node is not a cluster
}

// TestStatsFollowDone: Done reads the outbox afresh in the same call, so
// the figures follow the sends even when Take would not read for long
// (StatsEvery an hour): no stale backlog, no oldest entry growing old in
// /stats and /metrics after the last reply went out.
func TestStatsFollowDone(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		var clock testclock.Clock
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{StatsEvery: time.Hour, Clock: clock.Now})
		o.Add(ctx, reply(1))
		entries, err := tg.Client.XRange(ctx, prefix+"o:{42}", "-", "+").Result()
		if err != nil || len(entries) != 1 {
			t.Fatalf("the stream after one Add: %v, %v", entries, err)
		}
		first := idTime(t, entries[0].ID)
		// The younger entry's id must be of a later millisecond of Redis's
		// clock, which no test clock moves: at most a millisecond's wait.
		eventually.True(t, 5*time.Second, "Redis's clock passes the first entry's millisecond", func() bool {
			now, err := tg.Client.Time(ctx).Result()
			return err == nil && now.UnixMilli() > first.UnixMilli()
		})
		o.Add(ctx, reply(2))
		got, err := o.Take(ctx, group, 2, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("Take = %v, %v", got, err)
		}
		second := idTime(t, got[1].ID)
		clock.Advance(time.Hour) // the two entries' ages are an hour apart from a millisecond
		if err := o.Done(ctx, group, got[0].ID); err != nil {
			t.Fatal(err)
		}
		// The oldest entry now is the younger one: its age is the clock's
		// time less its id's, which the older one's exceeds.
		lo := clock.Now().Sub(second)
		st := o.Stats(group)
		hi := clock.Now().Sub(second)
		if st.Length != 1 || st.Oldest < lo || st.Oldest > hi || st.Age < 0 || st.Age > time.Second {
			t.Errorf("Stats after the first Done = %+v, want one entry, the younger one (%v to %v old), read now", st, lo, hi)
		}
		if err := o.Done(ctx, group, got[1].ID); err != nil {
			t.Fatal(err)
		}
		if st := o.Stats(group); st.Length != 0 || st.Oldest != 0 || st.Age < 0 || st.Age > time.Second {
			t.Errorf("Stats after the last Done = %+v, want an empty outbox, read now", st)
		}
	})
}

// TestAddOncePerMessage: a reply with a Key is added once however often it
// comes, concurrently or later, even after it was sent and deleted; replies
// without a Key are never merged.
func TestAddOncePerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o := newOutbox(t, tg, redistest.Prefix(t), "a", outbox.Options{})
		r := reply(1)
		r.Key = "1:c5"
		together.Run(t, 50, func(int) (struct{}, error) { return struct{}{}, o.Add(ctx, r) })
		got, err := o.Take(ctx, group, 100, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("50 concurrent Adds of one message: %d replies (%v), want 1", len(got), err)
		}
		o.Done(ctx, group, got[0].ID)
		if err := o.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
		if more, _ := o.Take(ctx, group, 100, 0); len(more) != 0 {
			t.Errorf("a re-delivery after the reply was sent queued it again: %+v", more)
		}
		other := reply(1)
		other.Key = "1:c6"
		noKey := reply(1)
		for _, x := range []outbox.Entry{other, noKey, noKey} {
			if err := o.Add(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := o.Len(ctx, group); n != 3 {
			t.Errorf("another message and two without a key: length %d, want 3", n)
		}
	})
}

// TestIdleConsumersPruned: Init removes the consumers of earlier processes
// that hold nothing and have been idle longer than ClaimAfter, and keeps
// those that hold replies.
func TestIdleConsumersPruned(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		// Redis's clock tells a consumer's idle time, and no command sets
		// it: ClaimAfter is a millisecond, and the new start is tried until
		// Redis has seen the old consumers idle that long.
		opts := outbox.Options{Prefix: prefix, ClaimAfter: time.Millisecond}
		for i, name := range []string{"old1", "old2", "holder"} {
			opts.Consumer = name
			o := outbox.New(tg.Client, opts)
			if err := o.Init(ctx, group); err != nil {
				t.Fatal(err)
			}
			if name == "holder" {
				o.Add(ctx, reply(i))
			}
			o.Take(ctx, group, 10, 0)
		}
		opts.Consumer = "new"
		eventually.NoError(t, 10*time.Second, "a new start prunes the idle consumers", func() error {
			o := outbox.New(tg.Client, opts)
			defer o.Close()
			if err := o.Init(ctx, group); err != nil {
				t.Fatal(err)
			}
			cs, err := tg.Client.XInfoConsumers(ctx, prefix+"o:{42}", outbox.ConsumerGroup).Result()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range cs {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, []string{"holder"}) {
				return fmt.Errorf("consumers after a new start: %v, want only the one holding a reply", names)
			}
			return nil
		})
	})
}

// TestLostReadAnswerIsRecovered: Redis handed entries to this consumer but
// the answer never arrived (the connection was cut); the next Take finds
// them among the consumer's own pending entries at once.
func TestLostReadAnswerIsRecovered(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		via := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
		defer via.Close()
		o := outbox.New(via, outbox.Options{Prefix: prefix, Consumer: "a"})
		if err := o.Init(ctx, group); err != nil {
			t.Fatal(err)
		}
		o.Add(ctx, reply(1))
		// What a lost answer leaves behind: the entry pending under "a",
		// delivered by a read whose reply the consumer never saw.
		if err := tg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: outbox.ConsumerGroup, Consumer: "a",
			Streams: []string{prefix + "o:{42}", ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		proxy.Cut()
		if _, err := o.Take(ctx, group, 10, 0); err == nil {
			t.Fatal("Take succeeded through a cut connection")
		}
		proxy.Restore()
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 1 || got[0].PeerID != 1 {
			t.Fatalf("Take after the failed read = %+v, %v; want the entry pending under this consumer", got, err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestCancelEndsAWaitingTake: cancelling the context of a Take waiting
// for new replies makes it return at once, with nothing to send, even
// though Redis cannot cancel a blocked read; it adds nothing to the outbox,
// and a reply added afterwards is not lost with the cancelled read.
func TestCancelEndsAWaitingTake(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o := newOutbox(t, tg, redistest.Prefix(t), "a", outbox.Options{})
		type result struct {
			got []outbox.Entry
			err error
		}
		wait, cancel := context.WithCancel(ctx)
		done := make(chan result, 1)
		go func() {
			got, err := o.Take(wait, group, 10, time.Minute)
			done <- result{got, err}
		}()
		eventually.True(t, 5*time.Second, "Take waits", func() bool { return o.Waiting() == 1 })
		cancel()
		select {
		case r := <-done:
			if len(r.got) != 0 {
				t.Errorf("Take returned %+v, want no reply", r.got)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("cancelling the context did not end the waiting Take")
		}
		if n, _ := o.Len(ctx, group); n != 0 {
			t.Errorf("%d entries in the outbox, want none", n)
		}
		if err := o.Add(ctx, reply(1)); err != nil {
			t.Fatal(err)
		}
		if got, err := o.Take(ctx, group, 10, 0); err != nil || len(got) != 1 {
			t.Errorf("Take after the cancelled one = %+v, %v; want the reply added since", got, err)
		}
	})
}

// TestUnseenLostReadIsRecovered: entries pending under this consumer that
// no failed Take announced (the Redis client retried a read by itself, and
// the second answer hid the first) are found by the periodic check.
func TestUnseenLostReadIsRecovered(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		var clock testclock.Clock
		opts := outbox.Options{ClaimAfter: time.Minute, Clock: clock.Now}
		o := newOutbox(t, tg, prefix, "a", opts)
		o.Take(ctx, group, 1, 0) // the first periodic check, on an empty outbox
		o.Add(ctx, reply(1))
		if err := tg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: outbox.ConsumerGroup, Consumer: "a",
			Streams: []string{prefix + "o:{42}", ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		if got, _ := o.Take(ctx, group, 10, 0); len(got) != 0 {
			t.Fatalf("Take before the periodic check = %+v", got)
		}
		clock.Advance(opts.ClaimAfter) // past ClaimAfter: the periodic check is due
		idleFor(t, tg, prefix+"o:{42}", opts.ClaimAfter)
		got, err := o.Take(ctx, group, 10, 0)
		if err != nil || len(got) != 1 || got[0].PeerID != 1 {
			t.Fatalf("Take after ClaimAfter = %+v, %v; want the entry pending under this consumer", got, err)
		}
	})
}

// TestHeldIsPerCommunity: the streams of two communities can hold the same
// entry id. Done for one community's entry does not make the outbox forget
// that the other community's entry with that id is still being sent, so
// no recovery hands it out a second time.
func TestHeldIsPerCommunity(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		var clock testclock.Clock
		o := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "a", ClaimAfter: time.Minute, Clock: clock.Now})
		defer o.Close()
		if err := o.Init(ctx, 1, 2); err != nil {
			t.Fatal(err)
		}
		for _, g := range []int{1, 2} {
			// The same id in both streams, as two Redis servers' (or one
			// server's, within a millisecond) XADDs give.
			if err := tg.Client.XAdd(ctx, &redis.XAddArgs{Stream: fmt.Sprintf("%so:{%d}", prefix, g), ID: "5-1",
				Values: rawEntry(g, 10, "0")}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		second, err := o.Take(ctx, 2, 10, 0) // community 2's sender holds 5-1
		if err != nil || len(second) != 1 {
			t.Fatalf("Take of community 2 = %+v, %v", second, err)
		}
		first, err := o.Take(ctx, 1, 10, 0)
		if err != nil || len(first) != 1 {
			t.Fatalf("Take of community 1 = %+v, %v", first, err)
		}
		if err := o.Done(ctx, 1, first[0].ID); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute) // past ClaimAfter: the periodic recovery is due
		idleFor(t, tg, prefix+"o:{2}", time.Minute)
		if again, err := o.Take(ctx, 2, 10, 0); err != nil || len(again) != 0 {
			t.Errorf("Take of community 2 = %+v, %v; want nothing: its reply %s is still held", again, err, second[0].ID)
		}
	})
}

// TestConcurrentRecoveryHandsOutOnce: a read of two senders of one
// community (two tokens) failed, and both look for the entries it may
// have left pending at once; each entry goes to one of them.
func TestConcurrentRecoveryHandsOutOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		// Each round is a new chance for the four Takes to interleave.
		// What interleaves is the same code on every backend (the
		// handouts' bookkeeping, the scripts): a real server runs 300
		// rounds in under a second; miniredis, building a Lua interpreter
		// per call under -race (about 40 ms a round), runs 60, the same
		// scripts at another pace, in a fifth of the 12 s 300 took.
		rounds := 300
		if tg.Kind == redistest.Mini {
			rounds = 60
		}
		for round := range rounds {
			prefix := redistest.Prefix(t)
			o := newOutbox(t, tg, prefix, "a", outbox.Options{})
			addReplies(t, o, 1, 5)
			// What a lost answer leaves behind: the entries pending under "a".
			if err := tg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: outbox.ConsumerGroup, Consumer: "a",
				Streams: []string{prefix + "o:{42}", ">"}, Count: 10, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			failed, cancel := context.WithCancel(ctx)
			cancel()
			o.Take(failed, group, 25, 0) // fails: its answer may be lost
			seen := map[string]int{}
			for _, got := range together.Run(t, 4, func(int) ([]outbox.Entry, error) { return o.Take(ctx, group, 25, 0) }) {
				for _, r := range got {
					seen[r.ID]++
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Fatalf("round %d: entry %s handed out %d times", round, id, n)
				}
			}
			if len(seen) != 5 {
				t.Fatalf("round %d: %d entries recovered, want 5", round, len(seen))
			}
		}
	}, redistest.Mini, redistest.Real)
}

// TestTakeOverContinuesPastOneBatch: a dead consumer held more replies
// than one Take returns; a live one takes them all over in consecutive
// Takes, not one batch per ClaimAfter.
func TestTakeOverContinuesPastOneBatch(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		var clock testclock.Clock
		opts := outbox.Options{ClaimAfter: time.Minute, Clock: clock.Now}
		dead := newOutbox(t, tg, prefix, "dead", opts)
		live := newOutbox(t, tg, prefix, "live", opts)
		addReplies(t, dead, 1, 60)
		for taken := 0; taken < 60; {
			got, err := dead.Take(ctx, group, 25, 0)
			if err != nil || len(got) == 0 {
				t.Fatalf("the dead consumer's Take = %v, %v after %d", got, err, taken)
			}
			taken += len(got)
		}
		// The live consumer's periodic takeover runs at its first Take: it
		// finds nothing idle yet.
		seen := map[int]bool{}
		first, err := live.Take(ctx, group, 25, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range first {
			seen[r.PeerID] = true
		}
		if len(first) != 0 {
			t.Fatalf("the live consumer's first Take took over %d replies held less than ClaimAfter", len(first))
		}
		clock.Advance(opts.ClaimAfter)
		idleFor(t, tg, prefix+"o:{42}", opts.ClaimAfter)
		for range 4 {
			got, err := live.Take(ctx, group, 25, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range got {
				seen[r.PeerID] = true
			}
		}
		if len(seen) != 60 {
			t.Errorf("%d of the dead consumer's 60 replies taken over in 4 Takes, want all", len(seen))
		}
	})
}

// TestOnceStateIsSmall: one reply per reply key is remembered by a
// field of the community's once-hashes, its hash: a reply key of any
// length (an event_id of any length names the message) makes no key or
// field grow with the request, and every key the outbox writes has a
// TTL but for the stream and the random_id sequence.
func TestOnceStateIsSmall(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		long := reply(1)
		long.Key = "101:e" + strings.Repeat("x", 100000)
		short := reply(2)
		short.Key = "102:c7"
		for _, r := range []outbox.Entry{long, long, short, short} {
			if err := o.Add(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := o.Len(ctx, group); n != 2 {
			t.Errorf("outbox length %d, want 2: one reply per key", n)
		}
		fields := 0
		for _, k := range redistest.Keys(t, tg.Client, prefix) {
			if len(k) > len(prefix)+200 {
				t.Errorf("key of %d bytes: %.80s…", len(k), k)
			}
			switch {
			case k == prefix+"o:{42}" || k == prefix+"o:{42}:rid" || k == prefix+"f:layout": // the stream, the random_id sequence, the layout's version
			case tg.Client.TTL(ctx, k).Val() <= 0:
				t.Errorf("key %s without a TTL", k)
			default:
				for f := range tg.Client.HGetAll(ctx, k).Val() {
					switch {
					case len(f) == 1: // the state of the random_id sequence, or count.lua's mark of a dedupe hash (a cluster)
					case len(f) != 8:
						t.Errorf("once-field of %d bytes", len(f))
					default:
						fields++
					}
				}
			}
		}
		if fields != 2 {
			t.Errorf("%d once-fields, want one per reply key", fields)
		}
	})
}

// TestRecoveryLeavesEntriesOfAReadUnderWay: Redis has handed entries to a
// read of this instance that has not marked them held yet (its answer is
// on the way). A recovery running meanwhile leaves them to that read; once
// the read ended without them (its answer lost), they are recovered.
func TestRecoveryLeavesEntriesOfAReadUnderWay(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		o := newOutbox(t, tg, prefix, "a", outbox.Options{})
		addReplies(t, o, 1, 2)
		end := o.ReadUnderWay(group)
		if err := tg.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: outbox.ConsumerGroup, Consumer: "a",
			Streams: []string{prefix + "o:{42}", ">"}, Count: 10, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		failed, cancel := context.WithCancel(ctx)
		cancel()
		o.Take(failed, group, 10, 0) // another read failed: look for lost entries
		if got, err := o.Take(ctx, group, 10, 0); err != nil || len(got) != 0 {
			t.Fatalf("Take while the read is under way = %+v, %v; want nothing: the entries are that read's", got, err)
		}
		end()
		if got, err := o.Take(ctx, group, 10, 0); err != nil || len(got) != 2 {
			t.Errorf("Take once the read ended = %+v, %v; want its 2 entries, recovered", got, err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestDrainStopsAtTheHorizon: a shutting-down instance drains the replies
// stored before its first Drain, and no newer ones: those it reads by
// the way go back to the outbox at once, where a live instance takes them.
// Release then hands back what it still holds.
func TestDrainStopsAtTheHorizon(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		closing := newOutbox(t, tg, prefix, "closing", outbox.Options{})
		live := newOutbox(t, tg, prefix, "live", outbox.Options{})
		live.Take(ctx, group, 10, 0) // its periodic checks, on an empty outbox
		addReplies(t, closing, 1, 3)
		got, done, err := closing.Drain(ctx, group, 2)
		if err != nil || done || len(got) != 2 {
			t.Fatalf("first Drain = %d replies, done %v, %v; want 2 and more to come", len(got), done, err)
		}
		addReplies(t, live, 4, 5)
		rest, _, err := closing.Drain(ctx, group, 10)
		if err != nil || len(rest) != 1 || rest[0].PeerID != 3 {
			t.Fatalf("second Drain = %+v, %v; want the third reply only", rest, err)
		}
		if more, done, err := closing.Drain(ctx, group, 10); err != nil || !done || len(more) != 0 {
			t.Fatalf("third Drain = %+v, done %v, %v; want nothing, done", more, done, err)
		}
		newer, err := live.Take(ctx, group, 10, 0)
		if err != nil || !slices.Equal(peers(newer), []int{4, 5}) {
			t.Fatalf("the live instance's Take = %v, %v; want the replies stored after the drain began", peers(newer), err)
		}
		if err := closing.Done(ctx, group, got[0].ID); err != nil {
			t.Fatal(err)
		}
		if n, err := closing.Release(ctx, group); err != nil || n != 2 {
			t.Fatalf("Release = %d, %v; want the 2 replies held and not done", n, err)
		}
		back, err := live.Take(ctx, group, 10, 0)
		if err != nil || len(back) != 2 || back[0].PeerID != got[1].PeerID || back[1].PeerID != 3 {
			t.Errorf("the live instance's Take after Release = %+v, %v; want the 2 replies handed back", back, err)
		}
		if n, _ := closing.Release(ctx, group); n != 0 {
			t.Errorf("a second Release handed back %d, want 0", n)
		}
	})
}

// rawEntry is the field and value of a stream entry of a reply to peer in
// group, with text, random_id 1 of epoch 1, as the store writes them.
func rawEntry(group, peer int, text string) []any {
	return []any{freq.EntryField, fmt.Sprintf("%d,%d,0 1 1 %s", group, peer, text)}
}
