package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// recoverOwn finds entries Redis handed to this consumer whose answer never
// arrived: a connection cut mid-reply, a wait ended by closing its
// connection, or a read the Redis client retried by itself after a
// failure, whose second answer hid the first. They are pending under this
// consumer's name, so no other read returns them and nobody else takes
// them before ClaimAfter. It hands out those this instance does not hold
// and no read under way may have been given (see handouts) — at once after
// a failed Take (or always, when force is set, as Drain does). The
// failures nobody saw leave entries the takeover finds once they are idle
// for ClaimAfter (reclaim). more reports that entries may be left: too
// young to tell, or more than n.
func (o *Outbox) recoverOwn(ctx context.Context, c *community, group, n int, force bool) (out []Entry, more bool, err error) {
	if !force && !c.handouts.mayHaveLost() {
		return nil, false, nil
	}
	minIdle, held, end := c.handouts.beginRecovery()
	defer end()
	args := make([]any, 0, 5+len(held))
	args = append(args, ConsumerGroup, o.opts.Consumer, (minIdle + time.Millisecond - 1).Milliseconds(), n+len(held), n)
	for _, id := range held {
		args = append(args, id)
	}
	v, err := recoverScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Slice()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			return nil, false, nil // the read of new entries recreates it
		}
		return nil, false, fmt.Errorf("outbox: recover own pending: %w", err)
	}
	more, msgs, err := recovered(v)
	if err != nil {
		return nil, false, fmt.Errorf("outbox: recover own pending: %w", err)
	}
	out = o.decode(ctx, c, group, msgs)
	c.handouts.noteLost(more)
	if len(out) > 0 {
		o.redelivs.Add(int64(len(out)))
		o.log.Warn().Int("group_id", group).Int("entries", len(out)).Msg("outbox: recovered replies whose read was lost")
	}
	return out, more, nil
}

// recovered takes recover.lua's reply apart: whether entries may be left,
// and the entries handed out.
func recovered(v []any) (left bool, msgs []redis.XMessage, err error) {
	if len(v) == 0 {
		return false, nil, errors.New("empty reply")
	}
	flag, ok := v[0].(int64)
	if !ok {
		return false, nil, fmt.Errorf("left: %T", v[0])
	}
	for _, e := range v[1:] {
		m, ok := scriptEntry(e)
		if !ok {
			continue // deleted meanwhile (Redis before 7 answers nil for it)
		}
		msgs = append(msgs, m)
	}
	return flag == 1, msgs, nil
}

// scriptEntry reads one stream entry from a script's reply, {id, {field, value, …}}.
func scriptEntry(v any) (redis.XMessage, bool) {
	e, ok := v.([]any)
	if !ok || len(e) != 2 {
		return redis.XMessage{}, false
	}
	id, ok := e[0].(string)
	fields, ok2 := e[1].([]any)
	if !ok || !ok2 || len(fields)%2 != 0 {
		return redis.XMessage{}, false
	}
	m := redis.XMessage{ID: id, Values: make(map[string]any, len(fields)/2)}
	for i := 0; i < len(fields); i += 2 {
		k, _ := fields[i].(string)
		m.Values[k] = fields[i+1]
	}
	return m, true
}

// reclaim takes over entries idle longer than ClaimAfter, this
// consumer's own among them (a read lost without a failure anybody saw),
// and reads the later set's earliest due time in the same call
// (claim.lua): while the later set is empty, the takeover's look at it is
// the only one (see takeDue). Take starts it every ClaimAfter per
// community (so an idle outbox costs Redis next to nothing) and goes on
// with it in the following Takes, n entries at a time, until it has looked
// at every pending entry. Entries this instance still holds (a send being
// retried) are skipped, not handed out twice.
func (o *Outbox) reclaim(ctx context.Context, c *community, group, n int) ([]Entry, error) {
	c.mu.Lock()
	from := c.claimFrom
	c.mu.Unlock()
	if from == "" {
		return nil, nil // another Take finished it meanwhile
	}
	_, end := c.handouts.beginRead()
	defer end()
	look := c.laterLook()
	v, err := claimScript.Run(ctx, o.rdb, []string{o.key(group), c.laterKey()}, ConsumerGroup, o.opts.Consumer,
		o.opts.ClaimAfter.Milliseconds(), from, n).Slice()
	var next string
	var msgs []redis.XMessage
	if err == nil {
		next, msgs, err = o.claimed(c, v, look)
	}
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			c.mu.Lock()
			c.claimFrom = ""
			c.mu.Unlock()
			return nil, nil // Take's read recreates it
		}
		return nil, fmt.Errorf("outbox: reclaim: %w", err)
	}
	if next == "0-0" {
		next = "" // done: the next takeover starts again in ClaimAfter
	}
	c.mu.Lock()
	c.claimFrom = next
	c.mu.Unlock()
	out := o.decode(ctx, c, group, msgs)
	if len(out) > 0 {
		o.redelivs.Add(int64(len(out)))
		o.log.Warn().Int("group_id", group).Int("entries", len(out)).Msg("outbox: took over replies another sender held too long")
	}
	return out, nil
}

// claimed takes claim.lua's reply apart: the cursor, and the entries taken
// over; it notes the later set's earliest due time in c (look: see
// noteDue).
func (o *Outbox) claimed(c *community, v []any, look uint64) (next string, msgs []redis.XMessage, err error) {
	if len(v) < 2 {
		return "", nil, fmt.Errorf("reply of %d elements", len(v))
	}
	next, ok := v[0].(string)
	due, ok2 := v[1].(string)
	if !ok || !ok2 {
		return "", nil, fmt.Errorf("reply begins %T, %T", v[0], v[1])
	}
	if err := o.noteDue(c, []string{due}, look); err != nil {
		return "", nil, err
	}
	for _, e := range v[2:] {
		if m, ok := scriptEntry(e); ok {
			msgs = append(msgs, m) // not one deleted meanwhile
		}
	}
	return next, msgs, nil
}
