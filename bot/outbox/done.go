package outbox

import (
	"context"
	"fmt"
	"slices"
)

// Done acknowledges entries of group, VK accepted or refused them for good
// (a reply set aside is removed from the later set: see Later),
// and trims the stream up to its oldest entry not finished (see trim.lua):
// an entry finished while an older one is still pending stays in the
// stream, never to be handed out again, until that one is finished. The
// same call reads group's outbox afresh for Stats.
func (o *Outbox) Done(ctx context.Context, group int, ids ...string) error {
	if slices.ContainsFunc(ids, isParked) {
		var parked, stream []string
		for _, id := range ids {
			if isParked(id) {
				parked = append(parked, id)
			} else {
				stream = append(stream, id)
			}
		}
		if err := o.forget(ctx, o.community(group), parked); err != nil {
			return err
		}
		ids = stream
	}
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, ConsumerGroup)
	for i := range ids {
		args = append(args, &ids[i]) // by pointer: a string in an interface costs an allocation
	}
	c := o.community(group)
	v, err := doneScript.Run(ctx, o.rdb, c.readingKeys(), args...).Slice()
	c.handouts.finished(ids, err == nil)
	if err != nil {
		return fmt.Errorf("outbox: done: %w", err)
	}
	c.mu.Lock()
	c.reading.set(v, o.opts.Clock())
	c.mu.Unlock()
	return nil
}
