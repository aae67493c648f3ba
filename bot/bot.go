// Package bot is the VK community bot: for every message it asks a Counter
// how many times the same message was received inside the window, and
// replies with that number through the community's VK tokens.
//
// Counting happens inside HandleMessage, before the webhook answers "ok";
// replying happens later, from a queue drained by one worker per token, so
// "ok" never waits for the VK API. Use New, then Close to drain the queue on
// shutdown.
package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
)

// A Counter records one occurrence of identity and returns how many earlier
// occurrences the window holds. Count is idempotent per non-empty eventID.
// It is met by *freq.Store.
type Counter interface {
	Count(ctx context.Context, identity, eventID string) (freq.Result, error)
}

// Errors returned by HandleMessage; both mean "not counted, ask again later".
var (
	ErrClosed    = errors.New("bot: shutting down")
	ErrQueueFull = errors.New("bot: reply queue full")
)

// A Group is one community the bot serves.
type Group struct {
	ID int
	// Senders deliver this community's replies, one per token; replies
	// are spread over them. Use DryRun when there is no token.
	Senders []Sender
}

// Options configure a Bot. Zero fields mean the documented defaults.
type Options struct {
	// Normalize makes Identity fold case and white space.
	Normalize bool
	// QueueSize bounds the replies waiting per community (default 100000).
	// When it is full HandleMessage fails, so VK re-delivers the event later.
	QueueSize int
	// RatePerToken is the most VK calls per second per token (default 20).
	RatePerToken float64
	// RetryBase and RetryMax bound the exponential backoff of retried sends
	// (defaults 200ms and 30s).
	RetryBase, RetryMax time.Duration
	// FloodPause is how long a token pauses after flood control (error 9)
	// before its one last try (default 10s).
	FloodPause time.Duration
	// HaltPause is how long a token that VK refused (5, 7, 29, 912) waits
	// before trying again (default 1m).
	HaltPause time.Duration
	// OnReplyDone, if set, is called once per reply when it leaves the
	// queue for good: delivered, dropped, or lost at shutdown (class Halt
	// is never reported; such replies are held). age is the time since the
	// reply was queued.
	OnReplyDone func(class Class, age time.Duration)
	Logger      zerolog.Logger
}

func (o *Options) setDefaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = 100000
	}
	if o.RatePerToken <= 0 {
		o.RatePerToken = 20
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 200 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.FloodPause <= 0 {
		o.FloodPause = 10 * time.Second
	}
	if o.HaltPause <= 0 {
		o.HaltPause = time.Minute
	}
}

// A Bot counts messages and replies to them. It is safe for concurrent use.
type Bot struct {
	counter Counter
	opts    Options
	log     zerolog.Logger
	queues  map[int]chan Reply // by group id; closed by Close

	closeMu sync.RWMutex // held for reading while enqueueing; Close takes it to close the queues
	closed  bool

	ctx     context.Context // the bot's lifetime: replies never inherit a request's context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	stats  counters
	halted sync.Map // *tokenWorker → error, while VK refuses that token
}

// counters are the bot's running totals, read by Stats.
type counters struct {
	received, duplicates, sent, retried, dropped, lost atomic.Int64
}

var _ callback.MessageHandler = (*Bot)(nil)

// New returns a Bot counting with counter and replying for groups, and
// starts its sender workers.
func New(counter Counter, groups []Group, opts Options) (*Bot, error) {
	opts.setDefaults()
	if len(groups) == 0 {
		return nil, errors.New("bot: no community configured")
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bot{counter: counter, opts: opts, log: opts.Logger, queues: map[int]chan Reply{}, ctx: ctx, cancel: cancel}
	for _, g := range groups {
		if _, dup := b.queues[g.ID]; dup {
			cancel()
			return nil, fmt.Errorf("bot: community %d configured twice", g.ID)
		}
		if len(g.Senders) == 0 {
			cancel()
			return nil, fmt.Errorf("bot: community %d has no sender", g.ID)
		}
		q := make(chan Reply, opts.QueueSize)
		b.queues[g.ID] = q
		for i, s := range g.Senders {
			w := &tokenWorker{bot: b, group: g.ID, index: i, sender: s, queue: q}
			b.workers.Add(1)
			go w.run()
		}
	}
	return b, nil
}

// HandleMessage counts m and queues its reply. A nil error means m is
// counted (now or by an earlier delivery of the same event) and its reply
// is queued.
func (b *Bot) HandleMessage(ctx context.Context, m callback.Message) error {
	q, ok := b.queues[m.GroupID]
	if !ok {
		return fmt.Errorf("bot: community %d is not served", m.GroupID)
	}
	b.closeMu.RLock()
	defer b.closeMu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	res, err := b.counter.Count(ctx, Identity(m, b.opts.Normalize), m.EventID)
	if err != nil {
		return fmt.Errorf("bot: count: %w", err)
	}
	b.stats.received.Add(1)
	if res.Duplicate {
		// Queue the reply again: the first delivery may have failed before
		// queueing it, and the same random_id makes a second send harmless.
		b.stats.duplicates.Add(1)
	}
	r := Reply{
		GroupID:  m.GroupID,
		PeerID:   m.PeerID,
		Message:  strconv.FormatInt(res.Previous, 10),
		RandomID: RandomID(m),
		EventID:  m.EventID,
		Queued:   time.Now(),
	}
	select {
	case q <- r:
		return nil
	default:
		return ErrQueueFull
	}
}

// Close stops accepting messages and waits until every queued reply is
// delivered or ctx ends; replies still undelivered then are logged and
// counted as lost.
func (b *Bot) Close(ctx context.Context) error {
	b.closeMu.Lock()
	if !b.closed {
		b.closed = true
		for _, q := range b.queues {
			close(q)
		}
	}
	b.closeMu.Unlock()

	done := make(chan struct{})
	go func() { b.workers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("bot: reply queue not drained: %w", ctx.Err())
	}
	b.cancel() // abort sends and backoffs still in progress
	<-done
	if lost := b.stats.lost.Load(); lost > 0 {
		b.log.Error().Int64("lost", lost).Msg("replies not delivered before shutdown")
	}
	return err
}

// Ready reports an error while VK refuses one of the tokens.
func (b *Bot) Ready() error {
	var err error
	b.halted.Range(func(_, v any) bool {
		err = v.(error)
		return false
	})
	return err
}

// Stats is a snapshot of the bot's running totals.
type Stats struct {
	Received   int64 `json:"received"`   // messages counted, duplicates included
	Duplicates int64 `json:"duplicates"` // re-deliveries of an event already counted
	Queued     int   `json:"queued"`     // replies waiting now
	Sent       int64 `json:"sent"`       // replies VK accepted
	Retried    int64 `json:"retried"`    // send attempts that will be retried
	Dropped    int64 `json:"dropped"`    // replies VK refused for good
	Lost       int64 `json:"lost"`       // replies abandoned at shutdown
}

// Stats returns the bot's running totals.
func (b *Bot) Stats() Stats {
	s := Stats{
		Received:   b.stats.received.Load(),
		Duplicates: b.stats.duplicates.Load(),
		Sent:       b.stats.sent.Load(),
		Retried:    b.stats.retried.Load(),
		Dropped:    b.stats.dropped.Load(),
		Lost:       b.stats.lost.Load(),
	}
	for _, q := range b.queues {
		s.Queued += len(q)
	}
	return s
}
