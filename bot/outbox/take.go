package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Take returns up to n entries of group for this instance to send: the
// replies set aside (Later) whose due time has come, topped up with
// entries other consumers held longer than ClaimAfter, or else new entries,
// waiting up to wait for new ones (0: do not wait). An empty result with a
// nil error means there is nothing to send now.
//
// A wait ends when ctx does. Redis cannot cancel a read waiting for new
// entries, so a waiting Take reads on a connection of its own (one per
// waiting Take, kept for the next), which is closed to end the wait early.
func (o *Outbox) Take(ctx context.Context, group, n int, wait time.Duration) ([]Entry, error) {
	c := o.community(group)
	due, err := o.takeDue(ctx, c, n)
	if err != nil {
		c.handouts.noteLost(true) // as for any failed Take: the next one recovers
		return nil, err
	}
	if len(due) > 0 {
		wait = 0 // something to send: top up with what is there
	}
	var out []Entry
	if len(due) < n {
		out, err = o.take(ctx, c, group, n-len(due), wait)
	}
	o.noteTaken(ctx, c, group, len(due)+len(out))
	if err != nil {
		c.handouts.noteLost(true)
		if len(due) > 0 {
			// Sent now, not left to come due in ClaimAfter; the next Take
			// meets the failure again, or recovers what it lost.
			o.log.Warn().Err(err).Int("group_id", group).Msg("outbox: cannot read new replies; sending those set aside")
			return due, nil
		}
	}
	return append(due, out...), err
}

// take recovers this consumer's lost reads after a failure, goes on
// with a takeover (one starts every ClaimAfter), or else reads new
// entries. While nothing fails and nothing flows, an idle sender's cycle
// is two commands: the takeover's step (which also finds this consumer's
// own entries whose read was lost unseen, and looks at the later set) and
// the read.
func (o *Outbox) take(ctx context.Context, c *community, group, n int, wait time.Duration) ([]Entry, error) {
	c.mu.Lock()
	if now := o.opts.Clock(); c.takeoverDue(now, o.opts.ClaimAfter) {
		c.lastClaim = now
		if c.claimFrom == "" {
			c.claimFrom = "0-0"
		}
	}
	claiming := c.claimFrom != ""
	c.mu.Unlock()
	if out, _, err := o.recoverOwn(ctx, c, group, n, false); len(out) > 0 || err != nil {
		return out, err
	}
	if claiming {
		if out, err := o.reclaim(ctx, c, group, n); len(out) > 0 || err != nil {
			return out, err
		}
	}
	if wait > 0 {
		wait = c.laterWait(wait, o.opts.Clock()) // a reply set aside comes due
	}
	return o.readNew(ctx, c, group, n, wait)
}

// readNew reads up to n new entries of group, waiting up to wait for one.
func (o *Outbox) readNew(ctx context.Context, c *community, group, n int, wait time.Duration) ([]Entry, error) {
	var rc redis.Cmdable = o.rdb
	own := false // rc is a connection of its own
	args := &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), ">"}, Count: int64(n), Block: wait}
	if wait <= 0 {
		args.Block = -1 // no BLOCK argument
	} else {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bc, err := o.blocker(ctx, group)
		if err != nil {
			return nil, err
		}
		if bc != nil {
			rc, own = bc, true
			cut := context.AfterFunc(ctx, func() { bc.Close() })
			defer func() { o.blockers.put(bc, cut()) }()
		}
	}
	_, end := c.handouts.beginRead()
	defer end()
	streams, err := rc.XReadGroup(ctx, args).Result()
	if redisconn.IsError(err, "NOGROUP") {
		// The stream was lost (a Redis without persistence restarted): recreate it.
		if err := o.createGroup(ctx, group); err != nil {
			return nil, err
		}
		streams, err = rc.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the wait was ended by closing its connection
		} else if own {
			// A connection of its own: the client given to New did not see
			// the failure, which may be its node's (a failover under way).
			redisconn.Refused(ctx, o.rdb, err)
		}
		return nil, fmt.Errorf("outbox: read: %w", err)
	}
	return o.decode(ctx, c, group, messages(streams)), nil
}

// takeoverDue reports whether a Take at now starts a takeover: ClaimAfter
// passed since the last one began. c.mu must be held.
func (c *community) takeoverDue(now time.Time, claimAfter time.Duration) bool {
	return now.Sub(c.lastClaim) >= claimAfter
}

func messages(streams []redis.XStream) []redis.XMessage {
	var msgs []redis.XMessage
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	return msgs
}

// decode turns stream entries into Entries and hands them out (see
// handouts.handOut): an entry two calls of this instance were given (a
// recovery, and a read under way) is handed out by one of them only. An
// entry that does not decode cannot ever be sent: it is logged and
// finished (Done).
func (o *Outbox) decode(ctx context.Context, c *community, group int, msgs []redis.XMessage) []Entry {
	out := make([]Entry, 0, len(msgs))
	var bad []string
	c.handouts.handOut(msgs, func(m redis.XMessage) bool {
		e, epoch, err := decodeEntry(m)
		if err != nil {
			o.log.Error().Err(err).Str("id", m.ID).Msg("outbox: undecodable entry dropped")
			bad = append(bad, m.ID)
			return false
		}
		c.queue.Saw(epoch, e.RandomID) // given out, whether or not its Record's answer came back
		out = append(out, e)
		return true
	})
	if len(bad) > 0 {
		o.Done(ctx, group, bad...)
	}
	return out
}
