// Package deadline hands out contexts that end a given time after the
// call, shared by the calls of the same moment: one context and one timer
// for many, where context.WithTimeout costs four allocations and a timer
// each, at thousands of calls a second.
package deadline

import (
	"context"
	"sync/atomic"
	"time"
)

// Shared hands out contexts that end no sooner than d after the call and
// at most slack later: one context for every call in a slice of slack,
// instead of one per call. It is safe for concurrent use.
type Shared struct {
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

// NewShared returns a Shared for d, whose slack is d/64, at most 100 ms.
func NewShared(d time.Duration) *Shared {
	return &Shared{d: d, slack: min(d/64, 100*time.Millisecond)}
}

// Context returns a context that ends between d and d+slack from now.
func (s *Shared) Context() context.Context {
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
