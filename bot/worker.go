package bot

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
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
	next   time.Time      // earliest start of the next call
}

func (w *tokenWorker) run() {
	b := w.bot
	defer b.workers.Done()
	backoff := b.opts.RetryBase
	for b.ctx.Err() == nil {
		closing := b.closing.Load()
		wait := b.opts.Poll
		if closing {
			wait = 0 // draining: stop as soon as nothing is left
		}
		batch, err := b.outbox.Take(b.ctx, w.group, b.opts.MaxBatch, wait)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			w.log.Error().Err(err).Msg("cannot read the outbox; retrying")
			w.sleep(backoff)
			backoff = min(2*backoff, b.opts.RetryMax)
			continue
		}
		backoff = b.opts.RetryBase
		if len(batch) == 0 {
			if closing {
				return
			}
			continue
		}
		w.deliver(batch)
	}
}

// deliver sends batch until VK accepted or refused each reply for good, or
// the bot's context ends; replies still unsent then stay in the outbox.
func (w *tokenWorker) deliver(batch []Reply) {
	b := w.bot
	backoff := b.opts.RetryBase
	floodTried := map[string]bool{}
	for len(batch) > 0 {
		if !w.sleep(time.Until(w.next)) {
			b.stats.unsent.Add(int64(len(batch)))
			return
		}
		w.next = time.Now().Add(time.Duration(float64(time.Second) / b.opts.RatePerToken))
		errs := w.sender.Send(b.ctx, batch)
		var again []Reply
		var finished []string
		var pause time.Duration
		for i, r := range batch {
			err := errs[i]
			class := Classify(err)
			if class == Flood && floodTried[r.ID] {
				class = Drop
			}
			switch class {
			case Delivered:
				b.stats.sent.Add(1)
				b.halted.Delete(w)
			case Logged:
				b.stats.dryRun.Add(1)
			case Drop:
				b.stats.dropped.Add(1)
				about(w.log.Warn(), r).Err(err).Msg("reply dropped: VK refused it for good")
			case Flood:
				floodTried[r.ID] = true
				pause = max(pause, b.opts.FloodPause)
				about(w.log.Warn(), r).Err(err).Dur("pause", b.opts.FloodPause).Msg("flood control; one more try after a pause")
			case Retry:
				b.stats.retried.Add(1)
				pause = max(pause, backoff/2+rand.N(backoff/2+1)) // jitter, so tokens do not retry in step
				about(w.log.Debug(), r).Err(err).Msg("send failed; retrying")
			case Halt:
				b.halted.Store(w, err)
				pause = max(pause, b.opts.HaltPause)
				about(w.log.Error(), r).Err(err).Dur("pause", b.opts.HaltPause).Msg("VK refuses this token: replies held, service not ready")
			}
			if class == Delivered || class == Drop || class == Logged {
				finished = append(finished, r.ID)
				if f := b.opts.OnReplyDone; f != nil {
					f(class, time.Since(r.Queued))
				}
			} else {
				again = append(again, r)
			}
		}
		w.finish(finished)
		if len(again) < len(batch) {
			backoff = b.opts.RetryBase // progress: the remaining ones failed for their own reasons
		} else {
			backoff = min(2*backoff, b.opts.RetryMax)
		}
		batch = again
		if len(batch) > 0 && !w.sleep(pause) {
			b.stats.unsent.Add(int64(len(batch)))
			return
		}
	}
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
