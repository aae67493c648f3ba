package bot

import (
	"sync"
	"sync/atomic"
	"time"
)

// An outage follows whether the VK API answers, over all tokens: the first
// failed call of an outage is logged at warn, then again every
// Options.OutageLogEvery while it lasts, and the first answer after it at
// info. A call "fails" when VK did not answer it (a network error, a
// timeout, a non-JSON page) or answered with an internal error (1, 10); an
// API error about the request itself is an answer.
type outage struct {
	bot      *Bot
	failures atomic.Int64 // consecutive failed calls; 0 while VK answers

	mu     sync.Mutex // guards since and logged
	since  time.Time  // when the current outage began
	logged time.Time  // when it was last logged
}

func (o *outage) init(b *Bot) { o.bot = b }

// call records the outcome of one VK call: err is nil when VK answered.
// waiting is how many replies the calling token holds, for the log.
func (o *outage) call(err error, waiting int) {
	b := o.bot
	if err == nil {
		n := o.failures.Swap(0)
		if n == 0 {
			return
		}
		o.mu.Lock()
		since := o.since
		o.mu.Unlock()
		b.log.Info().Int64("failed_calls", n).Stringer("down_for", time.Since(since).Round(time.Millisecond)).Msg("VK API answers again; sending the waiting replies")
		return
	}
	n := o.failures.Add(1)
	now := time.Now()
	o.mu.Lock()
	if n == 1 {
		o.since = now
	}
	first := n == 1
	due := first || now.Sub(o.logged) >= b.opts.OutageLogEvery
	if due {
		o.logged = now
	}
	since := o.since
	o.mu.Unlock()
	if !due {
		return
	}
	msg := "VK API not answering; replies stay in the outbox and are retried"
	if !first {
		msg = "VK API still not answering"
	}
	b.log.Warn().Err(err).Int64("failed_calls", n).Stringer("down_for", now.Sub(since).Round(time.Millisecond)).Int("replies_held", waiting).Msg(msg)
}

// ConsecutiveVKFailures is the number of VK API calls in a row that got no
// answer: 0 while VK answers.
func (b *Bot) ConsecutiveVKFailures() int64 { return b.outage.failures.Load() }

// unanswered reports whether a send error means VK did not answer the
// call: a transport failure or a VK internal error.
func unanswered(err error) bool {
	if err == nil {
		return false
	}
	code, isAPI := vkErrorCode(err)
	return !isAPI || code == 1 || code == 10
}
