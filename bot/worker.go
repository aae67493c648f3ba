package bot

import (
	"math/rand/v2"
	"time"
)

// A tokenWorker drains one community's queue through one token, at most
// Options.RatePerToken calls per second. Several workers of the same
// community share its queue, which spreads replies over the tokens.
type tokenWorker struct {
	bot    *Bot
	group  int
	index  int // position of the token in the community's list, for logs
	sender Sender
	queue  <-chan Reply
	next   time.Time // earliest start of the next call
}

func (w *tokenWorker) run() {
	defer w.bot.workers.Done()
	for r := range w.queue {
		w.deliver(r)
	}
}

// deliver sends r until VK accepts or refuses it for good, or the bot's
// context ends (then r is lost).
func (w *tokenWorker) deliver(r Reply) {
	b := w.bot
	log := b.log.With().Int("group_id", w.group).Int("token", w.index).Int("peer_id", r.PeerID).Int32("random_id", r.RandomID).Logger()
	backoff := b.opts.RetryBase
	floodTried := false
	for {
		if !w.wait(time.Until(w.next)) {
			w.lost(r)
			return
		}
		w.next = time.Now().Add(time.Duration(float64(time.Second) / b.opts.RatePerToken))
		err := w.sender.Send(b.ctx, []Reply{r})[0]
		var pause time.Duration
		switch class := Classify(err); class {
		case Delivered:
			b.stats.sent.Add(1)
			b.halted.Delete(w)
			w.done(r, class)
			return
		case Drop:
			b.stats.dropped.Add(1)
			log.Warn().Err(err).Msg("reply dropped: VK refused it for this peer")
			w.done(r, class)
			return
		case Flood:
			if floodTried {
				b.stats.dropped.Add(1)
				log.Warn().Err(err).Msg("reply dropped: flood control")
				w.done(r, class)
				return
			}
			floodTried = true
			pause = b.opts.FloodPause
			log.Warn().Err(err).Dur("pause", pause).Msg("flood control; pausing this token")
		case Retry:
			b.stats.retried.Add(1)
			pause = backoff/2 + rand.N(backoff/2+1) // jitter, so tokens do not retry in step
			backoff = min(2*backoff, b.opts.RetryMax)
			log.Debug().Err(err).Dur("backoff", pause).Msg("send failed; retrying")
		case Halt:
			b.halted.Store(w, err)
			pause = b.opts.HaltPause
			log.Error().Err(err).Dur("pause", pause).Msg("VK refuses this token: replies held, service not ready")
		}
		if !w.wait(pause) {
			w.lost(r)
			return
		}
	}
}

// lost accounts for a reply abandoned because the bot's context ended.
func (w *tokenWorker) lost(r Reply) {
	w.bot.stats.lost.Add(1)
	w.done(r, Lost)
}

// done reports a reply that left the queue for good.
func (w *tokenWorker) done(r Reply, class Class) {
	if f := w.bot.opts.OnReplyDone; f != nil {
		f(class, time.Since(r.Queued))
	}
}

// wait sleeps for d, or returns false at once if the bot's context ends.
func (w *tokenWorker) wait(d time.Duration) bool {
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
