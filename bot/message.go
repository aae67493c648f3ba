package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
)

// HandleMessage counts m and stores its reply. A nil error means m is
// counted (now or by an earlier delivery of the same message) and its reply
// is stored, or that m is not a person's message and is deliberately not
// counted (see Answered); any error means VK must deliver m again.
//
// The work runs on its own, bounded by Options.RecordTimeout: when ctx ends
// first (the webhook's deadline, while Redis stalls), HandleMessage returns
// at once with ctx's error and the work goes on, so that its late result
// is acted on exactly once and VK's re-delivery finds the message counted.
func (b *Bot) HandleMessage(ctx context.Context, m callback.Message) error {
	return callback.Await(ctx, nil, b, m)
}

// StartMessage starts HandleMessage's work on m and returns the channel
// its result comes on (callback.MessageStarter): the webhook waits for it
// without a context and a timer of its own per request.
func (b *Bot) StartMessage(m callback.Message) <-chan error {
	done := make(chan error, 1)
	if decided, err := b.admit(m); decided {
		done <- err
		return done
	}
	b.recordAsync(recordJob{m: m, done: done})
	return done
}

// GaveUp notes that the webhook stopped waiting for m's result, with err
// (its context's), and returns the error it answers with; the record goes
// on (callback.MessageStarter).
func (b *Bot) GaveUp(_ callback.Message, err error) error {
	b.stats.late.Add(1)
	return fmt.Errorf("bot: no answer from Redis in time, the message is recognised when it comes again: %w", err)
}

// admit decides m at once when it is not to be recorded (decided, with
// HandleMessage's result: a community not served, a message that is not
// a person's, a bot closing), else admits it to be recorded.
func (b *Bot) admit(m callback.Message) (decided bool, err error) {
	if !b.groups[m.GroupID] {
		return true, fmt.Errorf("bot: community %d is not served", m.GroupID)
	}
	if why := Answered(m); why != nil {
		b.stats.ignored.Add(1)
		b.log.Debug().Int("group_id", m.GroupID).Int("peer_id", m.PeerID).Int("from_id", m.FromID).
			Err(why).Msg("message not counted")
		return true, nil
	}
	if !b.enter() {
		return true, ErrClosed
	}
	return false, nil
}

// enter admits one message unless Close has begun.
func (b *Bot) enter() bool {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closing.Load() {
		return false
	}
	b.inflight.Add(1)
	return true
}

// record counts m and stores its reply, on the bot's own deadline.
func (b *Bot) record(m callback.Message) error {
	key := MessageKey(m)
	r := Reply{
		GroupID: m.GroupID,
		PeerID:  m.PeerID,
		Key:     key.ReplyKey(),
		Queued:  time.Now(),
	}
	b.opts.Quote.quote(&r, m)
	_, duplicate, err := b.recorder.Record(b.recordDeadline.Context(), TextKey(m, b.opts.Normalize), key.DedupeKey(), r)
	if err != nil && !errors.Is(err, outbox.ErrNotStored) {
		return fmt.Errorf("bot: count and store reply: %w", err)
	}
	// Counted, even if the reply was not stored: VK then delivers the
	// message again, as a duplicate, which must find its activity noted.
	b.counted(m, duplicate)
	if err != nil {
		return fmt.Errorf("bot: store reply: %w", err)
	}
	return nil
}

// counted updates the totals for m, just counted (again, if duplicate),
// and notes its activity the first time it is counted.
func (b *Bot) counted(m callback.Message, duplicate bool) {
	b.stats.received.Add(1)
	if duplicate {
		b.stats.duplicates.Add(1)
	} else if b.opts.Activity != nil {
		b.activity.note(m)
	}
}
