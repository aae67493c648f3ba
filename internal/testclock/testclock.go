// Package testclock is the tests' clock for code that takes its time as a
// func() time.Time (an Options.Clock): the machine's time moved ahead by
// what the test advanced it, so that a period passes at once, without a
// sleep, while the times it gives still compare with a server's clock
// (a Redis stream id, a TIME reply) as the machine's own would.
//
// Inside a testing/synctest bubble time.Sleep already moves every clock
// of the bubble; this is for tests that talk to a real server, which no
// bubble's clock moves.
package testclock

import (
	"sync/atomic"
	"time"
)

// A Clock is the machine's time plus an offset the test moves forward.
// It is safe for concurrent use; the zero Clock is the machine's time.
type Clock struct{ ahead atomic.Int64 }

// Now returns the machine's time plus everything Advance added: give it
// as the code's clock.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// Advance moves the clock d forward at once. d must not be negative: a
// clock that runs backwards is no clock the code meets outside tests.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("testclock: Advance by a negative duration")
	}
	c.ahead.Add(int64(d))
}
