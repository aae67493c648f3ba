package bot

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// A tokenWorker sends one community's replies through one token, at most
// Options.RatePerToken calls per second, up to Options.MaxBatch replies per
// call. Several workers of one community take from the same outbox, which
// spreads the replies over the tokens.
type tokenWorker struct {
	bot    *Bot
	group  int
	index  int // position of the token in the community's list, for logs
	sender Sender
	log    zerolog.Logger // with the community and the token's position
	pace   *rate.Limiter  // Options.RatePerToken calls per second, no burst

	// aside holds replies that met flood control, oldest first, each
	// until its due time; they stay taken from the outbox meanwhile.
	aside []asideReply
	// drained is set once the bot drains and the outbox has nothing more
	// for this worker: it sends what it holds, and stops.
	drained bool
	// limit is the most replies in one call while it is below
	// Options.MaxBatch (0: MaxBatch): halved when VK fails a whole execute
	// with error 13, grown back by one each call after.
	limit int
}

// An asideReply waits for its one last try after flood control.
type asideReply struct {
	Reply
	due time.Time
}

func (w *tokenWorker) run() {
	b := w.bot
	defer b.workers.Done()
	backoff := b.opts.RetryBase
	for b.ctx.Err() == nil {
		draining := b.draining.Load()
		batch, flooded := w.due()
		if room := w.batchLimit() - len(batch); room > 0 && !w.drained {
			var taken []Reply
			var err error
			if draining {
				taken, w.drained, err = b.outbox.Drain(b.ctx, w.group, room)
			} else {
				ctx, wait := b.ctx, w.wait(len(batch) > 0)
				if wait > 0 {
					ctx = b.waitCtx
				}
				taken, err = b.outbox.Take(ctx, w.group, room, wait)
			}
			if err != nil {
				if b.ctx.Err() != nil {
					break
				}
				if !draining && b.draining.Load() {
					continue // Close ended the wait: drain
				}
				w.log.Error().Err(err).Msg("cannot read the outbox; retrying")
				if len(batch) == 0 {
					w.sleep(backoff)
					backoff = min(2*backoff, b.opts.RetryMax)
					continue
				}
			} else {
				backoff = b.opts.RetryBase
				batch = append(batch, taken...)
			}
		}
		if len(batch) == 0 {
			switch {
			case w.drained && len(w.aside) == 0:
				return
			case w.drained:
				w.sleep(time.Until(w.aside[0].due)) // wait for the replies put aside
			case draining:
				w.sleep(drainPause) // entries may be left that are too young to tell
			}
			continue
		}
		w.deliver(batch, flooded)
	}
	b.stats.unsent.Add(int64(len(w.aside)))
}

// drainPause is how long a draining worker waits before asking the
// outbox again when it had nothing to give yet.
const drainPause = 10 * time.Millisecond

// batchLimit is the most replies the next call may carry.
func (w *tokenWorker) batchLimit() int {
	if w.limit > 0 {
		return w.limit
	}
	return w.bot.opts.MaxBatch
}

// due removes the replies put aside whose time has come (at most batchLimit)
// and returns them, with the set of their IDs: each has met flood control once.
func (w *tokenWorker) due() ([]Reply, map[string]bool) {
	now := time.Now()
	var batch []Reply
	var flooded map[string]bool
	for len(w.aside) > 0 && len(batch) < w.batchLimit() && !w.aside[0].due.After(now) {
		if flooded == nil {
			flooded = map[string]bool{}
		}
		batch = append(batch, w.aside[0].Reply)
		flooded[w.aside[0].ID] = true
		w.aside = w.aside[1:]
	}
	return batch, flooded
}

// wait is how long a Take may wait for new replies: not at all when there
// is something to send, else Poll, cut short when a reply put aside comes
// due sooner.
func (w *tokenWorker) wait(busy bool) time.Duration {
	if busy {
		return 0
	}
	wait := w.bot.opts.Poll
	if len(w.aside) > 0 {
		wait = max(min(wait, time.Until(w.aside[0].due)), time.Millisecond)
	}
	return wait
}

// deliver sends batch until VK accepted or refused each reply for good, or
// the bot's context ends; replies still unsent then stay in the outbox.
// Each call carries at most batchLimit replies. Replies that meet flood
// control for the first time are put aside (see Options.FloodPause) and
// the rest go on; flooded names those that met it before, which are
// dropped if they meet it again. A reply VK answers with codes it does not
// document (Unknown) is dropped after MaxUnknownTries sends.
func (w *tokenWorker) deliver(batch []Reply, flooded map[string]bool) {
	b := w.bot
	backoff := b.opts.RetryBase
	unknown := map[string]int{} // sends of a reply answered with an unknown code
	for len(batch) > 0 {
		if w.pace.Wait(b.ctx) != nil { // the bot's context ended
			b.stats.unsent.Add(int64(len(batch)))
			return
		}
		call, rest := batch, []Reply(nil)
		if n := w.batchLimit(); len(call) > n {
			call, rest = batch[:n:n], batch[n:]
		}
		errs := w.sender.Send(b.ctx, call)
		var again []Reply
		var finished []string
		var pause time.Duration
		var callErr error // nil if VK answered any of the sends
		answered := false
		shrink := false
		var token tokenAnswer // groups.getTokenPermissions, asked once per call at most
		for i, r := range call {
			err := errs[i]
			class := Classify(err)
			if class == Retry && unanswered(err) {
				callErr = err
			} else {
				answered = true // VK answered, or nothing was asked of it (dry-run)
			}
			if quoteRefused(r, err) {
				// A quote never costs the reply: it goes again without, in
				// the next call the token's rate allows.
				r.QuoteCMID, r.ReplyTo = 0, 0
				again = append(again, r)
				about(w.log.Debug(), r).Err(err).Msg("VK refused the quote; sending the reply without it")
				continue
			}
			switch class {
			case Flood:
				if flooded[r.ID] {
					class = Drop
				}
			case Retry:
				shrink = shrink || len(call) > 1 && wholeExecuteFailed(err)
			case Unknown:
				if unknown[r.ID]++; unknown[r.ID] < MaxUnknownTries {
					class = Retry
				}
			case Permission:
				class, err = w.permission(&token, err)
			}
			switch class {
			case Delivered:
				b.stats.sent.Add(1)
				b.halted.Delete(w)
			case Logged:
				b.stats.dryRun.Add(1)
			case Drop:
				b.dropped(r, err)
				about(w.log.Warn(), r).Err(err).Msg("reply dropped: VK refused it for good")
			case Unknown:
				b.dropped(r, err)
				about(w.log.Error(), r).Err(err).Int("sends", unknown[r.ID]).Msg("reply dropped: VK kept answering it with an error code the bot does not know")
			case Flood:
				w.aside = append(w.aside, asideReply{Reply: r, due: time.Now().Add(b.opts.FloodPause)})
				about(w.log.Warn(), r).Err(err).Stringer("pause", b.opts.FloodPause).Msg("flood control for this peer; one more try after a pause, other replies go on")
			case Retry:
				b.stats.retried.Add(1)
				pause = max(pause, backoff/2+rand.N(backoff/2+1)) // jitter, so tokens do not retry in step
				about(w.log.Debug(), r).Err(err).Msg("send failed; retrying")
			case Halt:
				b.halted.Store(w, err)
				b.tokens.Recheck(w.group, w.index) // the token's state then shows VK's answer
				pause = max(pause, b.opts.HaltPause)
				about(w.log.Error(), r).Err(err).Stringer("pause", b.opts.HaltPause).Msg("VK refuses this token: replies held, service not ready")
			}
			switch class {
			case Delivered, Drop, Logged, Unknown:
				finished = append(finished, r.ID)
				if f := b.opts.OnReplyDone; f != nil {
					f(class, time.Since(r.Queued))
				}
			case Retry, Halt:
				again = append(again, r)
			}
		}
		if answered {
			callErr = nil
		}
		w.resize(len(call), shrink)
		b.outage.call(callErr, len(again)+len(rest)+len(w.aside))
		w.finish(finished)
		if len(again) < len(call) {
			backoff = b.opts.RetryBase // progress: the remaining ones failed for their own reasons
		} else {
			backoff = min(2*backoff, b.opts.RetryMax)
		}
		batch = append(again, rest...)
		if len(batch) > 0 && !w.sleep(pause) {
			b.stats.unsent.Add(int64(len(batch)))
			return
		}
	}
}

// resize sets the batch limit after a call of n replies: halved when VK
// failed the whole execute with error 13 (shrink), else one more, up to
// Options.MaxBatch.
func (w *tokenWorker) resize(n int, shrink bool) {
	switch {
	case shrink:
		w.limit = max(1, n/2)
		w.log.Warn().Int("batch", n).Int("next_batch", w.limit).Msg("VK failed a whole execute (error 13); its replies are retried in smaller batches")
	case w.limit > 0:
		if w.limit++; w.limit >= w.bot.opts.MaxBatch {
			w.limit = 0
		}
	}
}

// A tokenAnswer is VK's answer about the worker's token, asked at most
// once per call.
type tokenAnswer struct {
	asked bool
	err   error
}

// permission decides about a reply VK refused with error 7 (sendErr): the
// token is asked about (groups.getTokenPermissions, once per call). With
// the messages right, the refusal concerns this conversation: Drop. If VK
// confirms the token lacks it or refuses the token: Halt, with VK's
// answer as the error. If VK does not say: Retry. A Sender that cannot
// ask drops the reply.
func (w *tokenWorker) permission(t *tokenAnswer, sendErr error) (Class, error) {
	tc, ok := w.sender.(TokenChecker)
	if !ok {
		return Drop, sendErr
	}
	if !t.asked {
		t.asked = true
		// A call like any other: within the token's rate.
		if t.err = w.pace.Wait(w.bot.ctx); t.err == nil {
			t.err = tc.CheckToken(w.bot.ctx)
		}
	}
	switch {
	case t.err == nil:
		return Drop, sendErr
	case errors.Is(t.err, vkapi.ErrTokenRefused):
		return Halt, t.err
	}
	return Retry, errors.Join(sendErr, t.err)
}

// about adds the reply's identifying fields to a log line; a disabled
// level costs nothing.
func about(e *zerolog.Event, r Reply) *zerolog.Event {
	return e.Int("peer_id", r.PeerID).Int32("random_id", r.RandomID)
}

// finish removes finished replies from the outbox. It must happen even
// when shutdown is cancelling everything else: a reply left there is sent
// again after a restart (harmless, but noisy).
func (w *tokenWorker) finish(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.bot.ctx), 5*time.Second)
	defer cancel()
	if err := w.bot.outbox.Done(ctx, w.group, ids...); err != nil {
		w.log.Error().Err(err).Int("replies", len(ids)).Msg("cannot remove sent replies from the outbox; they will be sent again (VK delivers them once)")
	}
}

// sleep waits for d, or returns false at once if the bot's context ends.
func (w *tokenWorker) sleep(d time.Duration) bool {
	if err := w.bot.ctx.Err(); err != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.bot.ctx.Done():
		return false
	}
}
