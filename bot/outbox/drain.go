package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// releaseBatch is the most pending entries Release looks at in one call.
const releaseBatch = 1000

// A drain is how far Drain has gone with one community; community.mu
// guards it.
type drain struct {
	began   bool   // the horizon is read
	horizon string // the id of the newest entry when the drain began; "" if none
	newDone bool   // no entry up to horizon is left unread by the group
}

// Drain returns up to n entries of group that this instance is still to
// send while it shuts down, without waiting: first the entries Redis handed
// to it whose answer was lost (see recoverOwn), then the replies set aside
// come due (see Later; done waits for those this instance set aside that
// come due within drainLater), then the new entries stored
// before the first Drain of group, the horizon. Newer entries are left to
// the other instances; any that a read returns past the horizon are handed
// back at once (see Release). done reports that nothing is left for this
// instance to drain of group beyond what it holds; none and done false
// mean that entries may come due shortly: call again.
func (o *Outbox) Drain(ctx context.Context, group, n int) (out []Entry, done bool, err error) {
	c := o.community(group)
	defer func() {
		if err != nil {
			c.handouts.noteLost(true)
		}
	}()
	d, err := o.drainOf(ctx, c, group)
	if err != nil {
		return nil, false, err
	}
	out, more, err := o.recoverOwn(ctx, c, group, n, true)
	if len(out) > 0 || err != nil {
		return out, false, err
	}
	due, err := o.takeDue(ctx, c, n)
	if len(due) == n || err != nil {
		return due, false, err
	}
	c.mu.Lock()
	newDone := c.drain.newDone
	c.mu.Unlock()
	if newDone {
		if len(due) > 0 {
			return due, false, nil
		}
		soon, err := o.mineDueSoon(ctx, c)
		return nil, !more && !soon, err
	}
	out, err = o.readUpTo(ctx, c, group, n-len(due), d)
	if err != nil && len(due) > 0 {
		c.handouts.noteLost(true)
		return due, false, nil // sent now; the next Drain meets the failure again
	}
	return append(due, out...), false, err
}

// drainOf returns group's drain as it began (its horizon), reading the
// horizon on the first call.
func (o *Outbox) drainOf(ctx context.Context, c *community, group int) (drain, error) {
	c.mu.Lock()
	d := c.drain
	c.mu.Unlock()
	if d.began {
		return d, nil
	}
	last, err := o.rdb.XRevRangeN(ctx, o.key(group), "+", "-", 1).Result()
	if err != nil {
		return drain{}, fmt.Errorf("outbox: read the newest entry: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.drain.began {
		c.drain.began = true
		if len(last) > 0 {
			c.drain.horizon = last[0].ID
		} else {
			c.drain.newDone = true
		}
	}
	return c.drain, nil
}

// readUpTo reads up to n new entries of group and hands out those up to
// d's horizon; the others it hands back. Once the group has delivered an
// entry past the horizon, or fewer than n, every entry up to it is read.
func (o *Outbox) readUpTo(ctx context.Context, c *community, group, n int, d drain) ([]Entry, error) {
	_, end := c.handouts.beginRead()
	defer end()
	streams, err := o.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), ">"}, Count: int64(n), Block: -1}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		if redisconn.IsError(err, "NOGROUP") {
			err = nil // the stream was lost: nothing to drain
		} else {
			return nil, fmt.Errorf("outbox: read: %w", err)
		}
	}
	msgs := messages(streams)
	var mine []redis.XMessage
	var later []string
	for _, m := range msgs {
		if compareIDs(m.ID, d.horizon) <= 0 {
			mine = append(mine, m)
		} else {
			later = append(later, m.ID)
		}
	}
	// Held while they are handed back, so that a recovery meanwhile cannot
	// hand them out too.
	past := c.handouts.holdToGiveBack(later)
	if len(past) > 0 || len(msgs) < n {
		c.mu.Lock()
		c.drain.newDone = true
		c.mu.Unlock()
	}
	if len(past) > 0 {
		_, _, err := o.release(ctx, group, past...)
		c.handouts.letGo(past)
		if err != nil {
			o.log.Warn().Err(err).Int("group_id", group).Int("entries", len(past)).
				Msg("outbox: cannot hand back replies read past the drain; they are taken over after OUTBOX_CLAIM_AFTER")
		}
	}
	return o.decode(ctx, c, group, mine), nil
}

// compareIDs compares two stream entry ids ("ms-seq") as Redis orders them.
func compareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	if am != bm {
		return cmp.Compare(am, bm)
	}
	return cmp.Compare(as, bs)
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// Release hands back every entry of group this instance took and has not
// finished with Done — those it holds and those whose read it lost — as
// new entries, which any instance reads at once instead of taking them
// over after ClaimAfter; the replies it took from the later set are made
// due at once. A shutting-down instance calls it for what its
// deadline left unsent; a send of one of them still under way may then be
// repeated by another instance (VK delivers one message per random_id).
// It returns how many entries were handed back.
func (o *Outbox) Release(ctx context.Context, group int) (int, error) {
	total, err := o.releaseParked(ctx, o.community(group))
	if err != nil {
		return 0, err
	}
	for {
		released, looked, err := o.release(ctx, group)
		total += released
		if err != nil {
			return total, err
		}
		if looked < releaseBatch {
			break
		}
	}
	o.community(group).handouts.clear()
	if total > 0 {
		o.log.Info().Int("group_id", group).Int("entries", total).Msg("outbox: handed back replies not sent, for the other instances")
	}
	return total, nil
}

// release runs release.lua for ids of group, or for every entry pending
// under this consumer (up to releaseBatch) when there are none.
func (o *Outbox) release(ctx context.Context, group int, ids ...string) (released, looked int, err error) {
	args := make([]any, 0, 3+len(ids))
	args = append(args, ConsumerGroup, o.opts.Consumer, releaseBatch)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := releaseScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Int64Slice()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			return 0, 0, nil // the stream was lost: nothing to hand back
		}
		return 0, 0, fmt.Errorf("outbox: release: %w", err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("outbox: release: reply %v", v)
	}
	return int(v[0]), int(v[1]), nil
}
