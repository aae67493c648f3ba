package bot

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot/pace"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// A tokenWorker sends one community's replies through one token, at most
// Options.RatePerToken calls per second, up to Options.MaxBatch replies per
// call. Several workers of one community take from the same outbox, which
// spreads the replies over the tokens.
//
// Each call's replies are sorted out on their own: a reply VK refuses for
// now is set aside in the outbox (Outbox.Later) with its own retry state
// and due time, and the worker takes new replies at once, so a reply that
// fails never holds up another. The worker's state is its goroutine's.
type tokenWorker struct {
	bot    *Bot
	group  int
	index  int // position of the token in the community's list, for logs
	sender Sender
	log    zerolog.Logger // with the community and the token's position
	pace   pace.Pace      // the token's calls, across the fleet (or this process alone)

	// carry holds replies for the next call: refused for the token's pace
	// (6) or for their quote, or waiting for their peer's probe.
	carry []Reply
	// pause is when the token may send again after VK refused it (a halt,
	// a captcha); zero if it is not paused. Its next call then carries one
	// reply: a probe.
	pause time.Time
	probe bool
	// peers gate the replies of peers VK refuses for now.
	peers peerGates
	// backoff is the wait after a call that got nothing through (VK down):
	// doubling from Options.RetryBase to RetryMax, reset by progress.
	backoff time.Duration
	// drained is set once the bot drains and the outbox has nothing more
	// for this worker: it sends what it holds, and stops.
	drained bool
	// limit is the most replies in one call while it is below
	// Options.MaxBatch (0: MaxBatch): halved when VK fails a whole execute
	// with error 13, grown back by one each call after.
	limit int
	// ahead is how many calls' worth of replies one read takes (see
	// Options.ClaimAfter), at least 1.
	ahead int
	// acks are the finished replies not yet removed from the outbox: they
	// go with the next read (acknowledge), so that the calls of one read
	// cost one Done.
	acks []string
}

// readsAhead returns how many calls' worth of replies a worker reads at
// once under opts (see Options.ClaimAfter).
func readsAhead(opts Options) int {
	calls := time.Duration(float64(ReadAhead) * float64(time.Second) / opts.RatePerToken)
	if opts.ClaimAfter > 0 && 20*calls <= opts.ClaimAfter {
		return ReadAhead
	}
	return 1
}

func (w *tokenWorker) run() {
	b := w.bot
	defer b.workers.Done()
	w.peers = peerGates{}
	w.ahead = readsAhead(b.opts)
	defer w.acknowledge()
	readBackoff := b.opts.RetryBase
	for b.ctx.Err() == nil {
		draining := b.draining.Load()
		if wait := time.Until(w.pause); wait > 0 {
			w.acknowledge()
			if draining {
				break // what it carries is handed back
			}
			w.sleepUnlessDraining(wait)
			continue
		}
		batch := w.carry
		w.carry = nil
		if len(batch) < w.batchLimit() && !w.drained {
			w.acknowledge() // with the read: one Done for the calls of a read
			room := w.ahead*w.batchLimit() - len(batch)
			var taken []Reply
			var err error
			if draining {
				taken, w.drained, err = b.outbox.Drain(b.ctx, w.group, room)
			} else {
				ctx, wait := b.ctx, time.Duration(0)
				if len(batch) == 0 {
					ctx, wait = b.waitCtx, b.opts.Poll
				}
				taken, err = b.outbox.Take(ctx, w.group, room, wait)
			}
			if err != nil {
				if b.ctx.Err() != nil {
					w.carry = batch
					break
				}
				if !draining && b.draining.Load() {
					w.carry = batch
					continue // Close ended the wait: drain
				}
				w.log.Error().Err(err).Msg("cannot read the outbox; retrying")
				if len(batch) == 0 {
					w.sleep(readBackoff)
					readBackoff = min(2*readBackoff, b.opts.RetryMax)
					continue
				}
			} else {
				readBackoff = b.opts.RetryBase
				batch = append(batch, taken...)
			}
		}
		if len(batch) == 0 {
			switch {
			case w.drained:
				return
			case draining:
				w.sleep(drainPause) // entries may be left that are too young to tell
			}
			continue
		}
		w.deliver(batch)
	}
	b.stats.unsent.Add(int64(len(w.carry)))
}

// drainPause is how long a draining worker waits before asking the
// outbox again when it had nothing to give yet.
const drainPause = 10 * time.Millisecond

// batchLimit is the most replies the next call may carry: one while the
// token probes after a pause.
func (w *tokenWorker) batchLimit() int {
	switch {
	case w.probe:
		return 1
	case w.limit > 0:
		return w.limit
	}
	return w.bot.opts.MaxBatch
}

// A callOutcome gathers what one call did with its replies.
type callOutcome struct {
	finished []string // left the outbox: delivered, dropped, logged
	later    []Reply  // set aside until their Due
	waiting  []Reply  // replies of a probed peer, sent after its probe or set aside with it
	answered bool     // VK answered (or nothing was asked of it: dry-run)
	progress bool     // a reply left the outbox or goes on at once
	callErr  error    // the call's error when VK did not answer any of it
	noAnswer bool     // a reply got no answer from VK at all (a transport failure)
	shrink   bool     // VK failed a whole execute with 13
	paced    bool     // VK refused a send for the token's pace (6)
	captcha  bool     // VK asked for a captcha (14)
	pause    time.Duration
	pauseErr error
}

// deliver makes one call with batch (at most batchLimit replies) and sorts
// out each reply by VK's answer: finished, set aside with its retry state
// (Outbox.Later), or carried into the next call. Replies of a peer VK
// refuses for now are set aside without a call, but for one probe.
func (w *tokenWorker) deliver(batch []Reply) {
	b := w.bot
	var out callOutcome
	now := b.opts.Clock()
	call := make([]Reply, 0, len(batch))
	probed := map[int]bool{}
	for _, r := range batch {
		if len(call) >= w.batchLimit() {
			w.carry = append(w.carry, r)
			continue
		}
		if until, closed := w.peers.closed(r.PeerID, now); closed {
			r.Due, r.Flood = until, max(r.Flood, w.peers.floodLevel(r.PeerID))
			out.later = append(out.later, r)
			continue
		}
		if r.Flood > 0 && !w.peers.gated(r.PeerID) {
			w.peers.close(r.PeerID, now, r.Flood, now) // learnt from the reply: probe first
		}
		if w.peers.gated(r.PeerID) {
			if probed[r.PeerID] {
				out.waiting = append(out.waiting, r)
				continue
			}
			probed[r.PeerID] = true
		}
		call = append(call, r)
	}
	var slot pace.Slot
	if len(call) > 0 {
		var err error
		if slot, err = w.pace.Wait(b.ctx); err != nil { // the bot's context ended
			w.carry = append(append(w.carry, call...), out.waiting...)
			w.setAside(out.later)
			return
		}
		if !slot.Paused.IsZero() {
			// VK asked the token for a captcha (this instance or another):
			// the replies wait, set aside, until the pause ends.
			for _, r := range append(call, out.waiting...) {
				r.Due = slot.Paused
				out.later = append(out.later, r)
			}
			w.setAside(out.later)
			w.pause = slot.Paused
			return
		}
		if slot.Probe && len(call) > 1 {
			w.carry = append(w.carry, call[1:]...) // the probe carries one reply
			call = call[:1]
		}
		errs := w.sender.Send(b.ctx, call)
		var token tokenAnswer // groups.getTokenPermissions, asked once per call at most
		for i, r := range call {
			w.sort(&out, &token, r, errs[i], len(call))
		}
	}
	if out.answered {
		out.callErr = nil
	}
	for _, r := range out.waiting {
		if until, closed := w.peers.closed(r.PeerID, b.opts.Clock()); closed {
			r.Due, r.Flood = until, max(r.Flood, w.peers.floodLevel(r.PeerID))
			out.later = append(out.later, r)
		} else {
			w.carry = append(w.carry, r) // the probe went through: the peer's others follow
		}
	}
	w.resize(len(call), out.shrink)
	b.outage.call(out.callErr, len(w.carry)+len(out.later))
	w.finish(out.finished)
	w.setAside(out.later)
	ctx := context.WithoutCancel(b.ctx)
	switch {
	case out.captcha:
		w.pace.Pause(ctx, b.opts.CaptchaProbe) // for every instance
	case slot.Probe && out.answered:
		w.pace.Resume(ctx) // VK no longer asks
	}
	if out.paced {
		w.pace.Slow(ctx)
	}
	switch {
	case out.pause > 0:
		w.pause, w.probe = time.Now().Add(out.pause), true
	case w.probe && out.answered && out.pauseErr == nil:
		w.pause, w.probe = time.Time{}, false // VK takes the token's calls again
	}
	if len(call) == 0 {
		return
	}
	if out.progress || len(probed) == len(call) && !out.noAnswer {
		// Something got through, or only gated peers' probes failed: they
		// are paced by their own gates.
		w.backoff = 0
		return
	}
	// Nothing got through: VK is down or refuses everything for now.
	w.acknowledge() // not held up by the wait
	w.backoff = min(max(2*w.backoff, b.opts.RetryBase), b.opts.RetryMax)
	w.sleep(w.backoff/2 + rand.N(w.backoff/2+1)) // jitter, so tokens do not retry in step
}

// sort decides about reply r of a call of n replies, which VK answered
// with err, and notes it in out.
func (w *tokenWorker) sort(out *callOutcome, token *tokenAnswer, r Reply, err error, n int) {
	b := w.bot
	class := Classify(err)
	if class == Retry && unanswered(err) {
		out.callErr = err
	} else {
		out.answered = true // VK answered, or nothing was asked of it (dry-run)
	}
	if quoteRefused(r, err) {
		// A quote never costs the reply: it goes again without, in the
		// next call the token's rate allows.
		r.QuoteCMID, r.ReplyTo = 0, 0
		w.carry = append(w.carry, r)
		out.progress = true
		about(w.log.Debug(), r).Err(err).Msg("VK refused the quote; sending the reply without it")
		return
	}
	switch class {
	case Retry:
		out.shrink = out.shrink || n > 1 && wholeExecuteFailed(err)
	case Unknown:
		if r.Unknown+1 < MaxUnknownTries {
			class = Retry
		}
		r.Unknown++
	case Permission:
		class, err = w.permission(token, err)
	}
	now := b.opts.Clock()
	switch class {
	case Delivered:
		b.stats.sent.Add(1)
		b.halted.Delete(w)
		w.peers.open(r.PeerID)
	case Logged:
		b.stats.dryRun.Add(1)
	case Drop:
		b.dropped(r, err)
		about(w.log.Warn(), r).Err(err).Msg("reply dropped: VK refused it for good")
	case Unknown:
		b.dropped(r, err)
		about(w.log.Error(), r).Err(err).Int("sends", r.Unknown).Msg("reply dropped: VK kept answering it with an error code the bot does not know")
	case Paced:
		out.paced = true
		w.carry = append(w.carry, r)
		b.stats.retried.Add(1)
		about(w.log.Debug(), r).Err(err).Msg("VK refused the call for the token's pace; the reply goes in the next call")
	case Flood:
		level := max(r.Flood, w.peers.floodLevel(r.PeerID)) + 1
		pause := floodPause(b.opts, level)
		r.Flood, r.Due = level, now.Add(pause)
		w.peers.close(r.PeerID, r.Due, level, now)
		out.later = append(out.later, r)
		about(w.log.Warn(), r).Err(err).Stringer("pause", pause).Msg("flood control for this peer: its replies wait, other replies go on")
	case Retry:
		b.stats.retried.Add(1)
		r.Tries++
		r.Due = now.Add(retryPause(b.opts, r.Tries))
		if _, coded := vkErrorCode(err); !coded {
			out.noAnswer = true
		} else {
			// VK answered about this reply: its peer's other replies wait
			// for it, one send per pause, however many there are.
			w.peers.close(r.PeerID, r.Due, w.peers.floodLevel(r.PeerID), now)
		}
		out.later = append(out.later, r)
		about(w.log.Debug(), r).Err(err).Int("tries", r.Tries).Msg("send failed; set aside, other replies go on")
	case Captcha:
		b.stats.retried.Add(1)
		out.captcha = true
		r.Due = now.Add(b.opts.CaptchaProbe)
		out.later = append(out.later, r)
		about(w.log.Warn(), r).Err(err).Stringer("probe_in", b.opts.CaptchaProbe).Msg("VK asks for a captcha: the token pauses, its replies are kept")
	case Halt:
		b.halted.Store(w, err)
		b.tokens.Recheck(w.group, w.index) // the token's state then shows VK's answer
		out.pause, out.pauseErr = max(out.pause, b.opts.HaltPause), err
		r.Due = now.Add(b.opts.HaltPause)
		out.later = append(out.later, r)
		about(w.log.Error(), r).Err(err).Stringer("pause", b.opts.HaltPause).Msg("VK refuses this token: replies held, service not ready")
	}
	switch class {
	case Delivered, Drop, Logged, Unknown:
		out.progress = true
		out.finished = append(out.finished, r.ID)
		if f := b.opts.OnReplyDone; f != nil {
			f(class, time.Since(r.Queued))
		}
	}
}

// retryPause is how long a reply waits after its tries-th failed send:
// Options.RetryBase doubling up to RetryMax, with jitter so that replies
// failed together do not come due together.
func retryPause(o Options, tries int) time.Duration {
	d := o.RetryBase
	for i := 1; i < tries && d < o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, o.RetryMax)
	return d/2 + rand.N(d/2+1)
}

// floodPause is how long a peer's replies wait after its level-th
// refusal in a row by flood control: Options.FloodPause doubling up to
// FloodMax.
func floodPause(o Options, level int) time.Duration {
	d := o.FloodPause
	for i := 1; i < level && d < o.FloodMax; i++ {
		d *= 2
	}
	return min(d, o.FloodMax)
}

// setAside stores replies in the outbox's later set, each until its Due;
// the flooded peers' oldest beyond the bound are dropped there.
func (w *tokenWorker) setAside(replies []Reply) {
	if len(replies) == 0 {
		return
	}
	b := w.bot
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 5*time.Second)
	defer cancel()
	dropped, err := b.outbox.Later(ctx, w.group, replies...)
	if err != nil {
		w.log.Error().Err(err).Int("replies", len(replies)).Msg("cannot set replies aside in the outbox; they are taken over after OUTBOX_CLAIM_AFTER")
		return
	}
	for _, r := range dropped {
		err := errFloodKept
		b.dropped(r, err)
		about(w.log.Warn(), r).Err(err).Int("flood_level", r.Flood).Msg("reply dropped: its peer is under flood control with too many replies waiting")
		if f := b.opts.OnReplyDone; f != nil {
			f(FloodDropped, time.Since(r.Queued))
		}
	}
}

// errTokenPaused is why the token's rights were not asked about: VK asked
// it for a captcha meanwhile.
var errTokenPaused = errors.New("bot: the token is paused after a captcha")

// errFloodKept is why a reply is dropped past outbox.Options.FloodKeep.
var errFloodKept = errors.New("bot: flood control: the peer's oldest reply dropped, more are waiting than are kept")

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
		switch slot, err := w.pace.Wait(w.bot.ctx); {
		case err != nil:
			t.err = err
		case !slot.Paused.IsZero():
			t.err = errTokenPaused
		default:
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

// finish notes finished replies, to be removed from the outbox with the
// next read (acknowledge), or now when a read's worth is waiting.
func (w *tokenWorker) finish(ids []string) {
	w.acks = append(w.acks, ids...)
	if len(w.acks) >= w.ahead*w.bot.opts.MaxBatch {
		w.acknowledge()
	}
}

// acknowledge removes the finished replies from the outbox. It must happen
// even when shutdown is cancelling everything else: a reply left there is
// sent again after a restart (harmless, but noisy).
func (w *tokenWorker) acknowledge() {
	if len(w.acks) == 0 {
		return
	}
	ids := w.acks
	w.acks = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.bot.ctx), 5*time.Second)
	defer cancel()
	if err := w.bot.outbox.Done(ctx, w.group, ids...); err != nil {
		w.log.Error().Err(err).Int("replies", len(ids)).Msg("cannot remove sent replies from the outbox; they will be sent again (VK delivers them once)")
	}
}

// sleep waits for d, or returns false at once if the bot's context ends.
func (w *tokenWorker) sleep(d time.Duration) bool {
	return sleepOn(w.bot.ctx, d)
}

// sleepUnlessDraining waits for d, or until the bot drains or ends.
func (w *tokenWorker) sleepUnlessDraining(d time.Duration) bool {
	return sleepOn(w.bot.waitCtx, d)
}

// sleepOn waits for d, or returns false at once if ctx ends.
func sleepOn(ctx context.Context, d time.Duration) bool {
	if err := ctx.Err(); err != nil {
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
	case <-ctx.Done():
		return false
	}
}
