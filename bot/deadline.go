package bot

import (
	"context"
	"sync/atomic"
	"time"
)

// sharedDeadline hands out contexts that end no sooner than d after the
// call and at most slack later: one context for every call in a slice of
// slack, instead of one per message (context.WithTimeout costs four
// allocations and a timer, at thousands of messages a second).
type sharedDeadline struct {
	d, slack time.Duration
	cur      atomic.Pointer[deadlineCtx]
}

// deadlineCtx is one of the contexts shared; it is released by its own
// deadline, since calls may still hold it when the next one is made.
type deadlineCtx struct {
	ctx      context.Context
	deadline time.Time
	cancel   context.CancelFunc
}

// newSharedDeadline returns a sharedDeadline for d, whose slack is d/64,
// at most 100 ms.
func newSharedDeadline(d time.Duration) *sharedDeadline {
	return &sharedDeadline{d: d, slack: min(d/64, 100*time.Millisecond)}
}

// context returns a context that ends between d and d+slack from now.
func (s *sharedDeadline) context() context.Context {
	now := time.Now()
	earliest := now.Add(s.d)
	c := s.cur.Load()
	if c != nil && !c.deadline.Before(earliest) && c.deadline.Sub(earliest) <= s.slack {
		return c.ctx
	}
	next := &deadlineCtx{deadline: earliest.Add(s.slack)}
	next.ctx, next.cancel = context.WithDeadline(context.Background(), next.deadline)
	s.cur.CompareAndSwap(c, next) // a call that lost the race uses its own
	return next.ctx
}
