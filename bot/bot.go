// Package bot is the VK community bot: for every message it asks a Counter
// how many times the same message was received inside the window, stores
// the reply with that number in a durable Outbox, and sends it through the
// community's VK tokens.
//
// Counting and storing happen inside HandleMessage, before the webhook
// answers "ok"; sending happens later, in one worker per token, so "ok"
// never waits for the VK API and a crash loses no reply. Use New, then
// Close to drain on shutdown.
package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot/pace"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/deadline"
)

// A Recorder counts a message and stores its reply, in one step: it
// counts one occurrence of the text key and answers previous, how many
// earlier occurrences the window holds, and stores the reply r with that
// number as its text. It is idempotent per non-empty dedupe key (the
// message key's DedupeKey: a repeated key is not counted again and
// answers as the first time, with duplicate set) and per non-empty r.Key
// (one reply is stored per message). An error wrapping outbox.ErrNotStored
// says that the message was counted (previous and duplicate are the
// count's answer) but its reply not stored. *outbox.Outbox meets it.
type Recorder interface {
	Record(ctx context.Context, textKey, dedupeKey string, r Reply) (previous int64, duplicate bool, err error)
}

// An Outbox holds replies durably from their Record until VK accepted
// them. *outbox.Outbox meets it.
type Outbox interface {
	// Take returns up to n replies of group to send, each with its ID,
	// waiting up to wait for one; none and a nil error mean nothing to do.
	// A wait ends early when ctx ends.
	Take(ctx context.Context, group, n int, wait time.Duration) ([]Reply, error)
	// Drain returns up to n replies of group that this instance is still
	// to send while it shuts down, without waiting: those handed to it
	// whose answer was lost, and those stored before its first Drain of
	// group, never newer ones (the other instances send those). done
	// reports that nothing is left to drain of group beyond what the
	// senders hold; none and done false mean: call again shortly.
	Drain(ctx context.Context, group, n int) (replies []Reply, done bool, err error)
	// Done removes replies VK accepted or refused for good.
	Done(ctx context.Context, group int, ids ...string) error
	// Later sets replies of group aside, each until its Due, with its
	// retry state, for any sender to Take once due; it returns those it
	// dropped for their peer's bound under flood control.
	Later(ctx context.Context, group int, replies ...Reply) (dropped []Reply, err error)
	// Release hands back the replies of group this instance took and did
	// not finish with Done, for the other instances to send at once.
	Release(ctx context.Context, group int) (int, error)
}

// Activity records what the bot sees beyond the replies' counts. Its
// methods are the batched ones of the access, participant and unique
// stores of package counters, so the stores adapt to it with short
// methods.
type Activity interface {
	// AddOnce adds n to the access counter name, at most once per batch:
	// a call that failed with an unknown outcome (a timeout after Redis
	// ran it) is retried with the same batch and changes nothing twice.
	AddOnce(ctx context.Context, name string, n int64, batch string) (total int64, err error)
	// VisitMany records keys as seen now under the participant counter name.
	VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (active, added int, err error)
	// AddUnique adds keys to the unique counter name and returns its
	// estimate; with no key, it only reads the estimate. Adding a key
	// again changes nothing, so a retry is safe.
	AddUnique(ctx context.Context, name string, keys []string) (estimate int64, err error)
}

// MaxBatch is the most replies one VK call sends: the most API calls one
// execute call may make.
const MaxBatch = 25

// ReadAhead is how many calls' worth of replies a sender reads at once
// when Options.ClaimAfter allows it.
const ReadAhead = 4

// DefaultRatePerToken is the default of Options.RatePerToken (VK_RATE):
// VK's limit for a community token.
const DefaultRatePerToken = 20

// DefaultCaptchaProbe is the default of Options.CaptchaProbe: a token VK
// asked a captcha of sends one reply every 5 s until VK takes it.
const DefaultCaptchaProbe = 5 * time.Second

// ErrClosed is returned by HandleMessage once Close has begun: the message
// is not counted and VK should deliver it again (to another instance).
var ErrClosed = errors.New("bot: shutting down")

// ErrNotDrained is wrapped by Close when its context ended before the
// senders finished draining: the replies left are handed back to the
// outbox, for another instance or the next start (unless Redis keeps
// nothing).
var ErrNotDrained = errors.New("bot: outbox not drained")

// A Group is one community the bot serves.
type Group struct {
	ID int
	// Senders deliver this community's replies, one per token; replies
	// are spread over them. Use DryRun when there is no token.
	Senders []Sender
	// Paces pace each sender's token, in the same order, across every
	// instance sending with it (pace.Shared); nil (or a nil entry) paces
	// it in this process alone, at Options.RatePerToken.
	Paces []pace.Pace
}

// Options configure a Bot. Zero fields mean the documented defaults.
type Options struct {
	// Normalize makes TextKey fold case and white space.
	Normalize bool
	// Quote says which replies quote the message they answer (default
	// QuoteChats).
	Quote Quote
	// MaxBatch is the most replies sent in one VK call (default and at
	// most MaxBatch).
	MaxBatch int
	// RatePerToken is the most VK calls per second per token
	// (DefaultRatePerToken).
	RatePerToken float64
	// ClaimAfter is the outbox's (outbox.Options.ClaimAfter): how long a
	// reply read by a sender may wait before another instance takes it
	// over. When ReadAhead calls at RatePerToken take at most a twentieth
	// of it, a sender with less than a call's worth of replies reads
	// ReadAhead calls' worth at once, and acknowledges the replies of
	// those calls together with its next read: two Redis calls for up to
	// ReadAhead calls' replies instead of two for each (BENCHMARKS.md).
	// Zero: one call's worth at a time.
	ClaimAfter time.Duration
	// Poll is how long a sender waits for new replies in one Take (default
	// 30s). A new reply ends the wait at once, so a long Poll costs no
	// latency, and so does Close; it only sets how often an idle sender
	// asks Redis again.
	Poll time.Duration
	// RetryBase and RetryMax bound the exponential backoff of retried sends
	// (defaults 200ms and 2s: replies resume within about RetryMax of VK
	// coming back).
	RetryBase, RetryMax time.Duration
	// FloodPause is how long a peer's replies wait after flood control
	// (error 9) first refused one (default 10s); each refusal in a row
	// doubles it, up to FloodMax (default 1h: VK's limit per user is
	// hourly). Flood control is about one recipient: the token keeps
	// sending everyone else's replies.
	FloodPause, FloodMax time.Duration
	// HaltPause is how long a token that VK refused (5, 27, 29, or 7
	// with groups.getTokenPermissions confirming it) waits before trying
	// again (default 1m).
	HaltPause time.Duration
	// CaptchaProbe is how long a token VK asked a captcha of (error 14)
	// waits before one reply probes whether VK still asks
	// (DefaultCaptchaProbe); give a pace.Shared the same.
	CaptchaProbe time.Duration
	// RecordTimeout bounds the Redis calls that count a message and store
	// its reply (default 30s). They go on after HandleMessage's context
	// ends (the webhook answered 503 at its deadline): a late answer is
	// still acted on, so the message is counted once, its activity noted
	// once and its reply stored once, and VK's re-delivery finds it done.
	// Messages received close together share one deadline, so a message's
	// may come up to RecordTimeout/64 (at most 100 ms) later.
	RecordTimeout time.Duration
	// OutageLogEvery is how often a VK outage is logged again while it
	// lasts (default 30s): the first failure and the recovery always are.
	OutageLogEvery time.Duration
	// OnReplyDone, if set, is called once per reply when it leaves the
	// outbox, with the class it left with: Delivered, Drop (VK refused it
	// for good), FloodDropped (dropped as its peer's oldest past the bound
	// under flood control), Unknown (VK kept answering it with an error
	// code the bot does not know) or Logged (dry-run); never Flood, Retry,
	// Halt, Permission, Paced or Captcha, whose replies stay. age is
	// the time since the reply was stored.
	OnReplyDone func(class Class, age time.Duration)
	// Activity, if set, is fed once per message counted for the first time
	// (never for a re-delivery of a message already counted): one more for
	// MessagesCounter and a visit of UsersCounter by the sender. The bot
	// gathers them and writes them in batches, at most ActivityFlush late
	// (a message's own Redis round trips stay two). A failed batch is logged,
	// counted in Stats and kept for the next flush; it never fails a
	// message: failing the webhook would make VK deliver it again.
	Activity Activity
	// ActivityFlush is the longest a message's activity waits to be
	// written (default 100ms).
	ActivityFlush time.Duration
	// ActivityTimeout bounds the Activity calls of one flush (default 1s).
	ActivityTimeout time.Duration
	// Tokens, if set, has VK asked about every token of a sender that can
	// check it (TokenChecker): see Bot.Tokens and Bot.Ready.
	Tokens *tokens.Options
	// Clock tells the time (default time.Now) by which a reply set aside
	// comes due (flood control, a peer VK refuses, a retry) and a peer's
	// gate opens; give the outbox the same one (outbox.Options.Clock),
	// which hands the reply out once due. The token's own pauses and the
	// calls' timeouts wait on the machine's timers.
	Clock  func() time.Time
	Logger zerolog.Logger
}

func (o *Options) setDefaults() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxBatch <= 0 || o.MaxBatch > MaxBatch {
		o.MaxBatch = MaxBatch
	}
	if o.RatePerToken <= 0 {
		o.RatePerToken = DefaultRatePerToken
	}
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 200 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 2 * time.Second
	}
	if o.FloodPause <= 0 {
		o.FloodPause = 10 * time.Second
	}
	if o.FloodMax <= 0 {
		o.FloodMax = time.Hour
	}
	o.FloodMax = max(o.FloodMax, o.FloodPause)
	if o.CaptchaProbe <= 0 {
		o.CaptchaProbe = DefaultCaptchaProbe
	}
	if o.HaltPause <= 0 {
		o.HaltPause = time.Minute
	}
	if o.RecordTimeout <= 0 {
		o.RecordTimeout = 30 * time.Second
	}
	if o.OutageLogEvery <= 0 {
		o.OutageLogEvery = 30 * time.Second
	}
	if o.ActivityTimeout <= 0 {
		o.ActivityTimeout = time.Second
	}
	if o.ActivityFlush <= 0 {
		o.ActivityFlush = 100 * time.Millisecond
	}
}

// A Bot counts messages and replies to them. It is safe for concurrent use.
type Bot struct {
	recorder Recorder
	outbox   Outbox
	opts     Options
	log      zerolog.Logger
	groups   map[int]bool

	closeMu  sync.Mutex     // guards setting closing against inflight.Add
	closing  atomic.Bool    // set by Close: no new messages
	inflight sync.WaitGroup // messages being recorded, including those whose webhook gave up
	// recordDeadline bounds each record by RecordTimeout.
	recordDeadline *deadline.Shared
	recorders      recorders
	// draining is set by Close once no message is being recorded (or at its
	// deadline): the senders read no new replies, finish what this
	// instance holds, and stop.
	draining atomic.Bool

	ctx    context.Context // the bot's lifetime: sends never inherit a request's context
	cancel context.CancelFunc
	// waitCtx bounds the senders' waits for new replies; Close ends it
	// when draining begins, so a sender waiting up to Poll turns to it.
	waitCtx   context.Context
	stopWaits context.CancelFunc
	workers   sync.WaitGroup

	stats    counters
	halted   sync.Map // *tokenWorker → error, while VK refuses that token
	drops    dropLog  // the last replies dropped, and why
	tokens   *tokens.Checker
	activity activityBatch
	outage   outage
}

// counters are the bot's running totals, read by Stats.
type counters struct {
	received, duplicates, ignored, late, sent, retried, dropped, dryRun, unsent, activityErrors atomic.Int64
}

var _ callback.MessageStarter = (*Bot)(nil)

// New returns a Bot recording messages with recorder, sending the replies
// that outbox holds for groups, and starts its sender workers.
func New(recorder Recorder, outbox Outbox, groups []Group, opts Options) (*Bot, error) {
	opts.setDefaults()
	if len(groups) == 0 {
		return nil, errors.New("bot: no community configured")
	}
	b := &Bot{recorder: recorder, outbox: outbox, opts: opts, log: opts.Logger, groups: map[int]bool{},
		recordDeadline: deadline.NewShared(opts.RecordTimeout)}
	b.recorders.init()
	b.outage.init(b)
	for _, g := range groups {
		if b.groups[g.ID] {
			return nil, fmt.Errorf("bot: community %d configured twice", g.ID)
		}
		if len(g.Senders) == 0 {
			return nil, fmt.Errorf("bot: community %d has no sender", g.ID)
		}
		b.groups[g.ID] = true
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.waitCtx, b.stopWaits = context.WithCancel(b.ctx)
	if opts.Activity != nil {
		b.activity.start(b)
	}
	if opts.Tokens != nil {
		var ts []tokens.Token
		for _, g := range groups {
			for i, s := range g.Senders {
				if c, ok := s.(TokenChecker); ok {
					ts = append(ts, tokens.Token{Group: g.ID, Index: i, Check: c.CheckToken})
				}
			}
		}
		o := *opts.Tokens
		o.Logger = opts.Logger
		b.tokens = tokens.Start(ts, o)
	}
	for _, g := range groups {
		for i, s := range g.Senders {
			var p pace.Pace = pace.NewLocal(b.opts.RatePerToken)
			if i < len(g.Paces) && g.Paces[i] != nil {
				p = g.Paces[i]
			}
			w := &tokenWorker{bot: b, group: g.ID, index: i, sender: s, pace: p,
				log: b.log.With().Int("group_id", g.ID).Int("token", i).Logger()}
			b.workers.Add(1)
			go w.run()
		}
	}
	return b, nil
}

// Close stops accepting messages, waits for those being recorded (a
// webhook that gave up while Redis was slow may still store a reply), then
// lets the senders drain: they send what this instance holds, the replies
// Redis handed it whose answer was lost, and the replies stored before the
// drain began, but read none stored later (the other instances send those),
// and stop. It returns nil once they are done.
//
// Close returns by ctx's deadline whatever happens. The last tenth of the
// time left (at most handBackReserve) is kept for the end: sends still
// under way are cancelled, and every reply this instance took and did not
// finish is handed back to the outbox, for another instance or the next
// start (with a persistent Redis); the error then wraps ErrNotDrained, as
// it does when the senders finished but an entry reached this instance
// after their last look and was handed back. No
// send begins after Close returned; a Sender that ignores its context may
// still finish one already under way. A ctx without a deadline drains
// until ctx ends, then hands back within handBackReserve.
func (b *Bot) Close(ctx context.Context) error {
	b.tokens.Close()
	b.closeMu.Lock()
	b.closing.Store(true)
	b.closeMu.Unlock()
	drainCtx, cancel := drainContext(ctx)
	defer cancel()

	recorded := make(chan struct{})
	go func() { b.inflight.Wait(); close(recorded) }()
	wait(drainCtx, recorded)
	b.recorders.close()
	activity := make(chan struct{})
	go func() {
		if b.opts.Activity != nil {
			b.activity.stop() // writes what the last messages noted
		}
		close(activity)
	}()

	b.draining.Store(true)
	b.stopWaits()
	done := make(chan struct{})
	go func() { b.workers.Wait(); close(done) }()
	if wait(drainCtx, done) {
		b.cancel()
		// An entry can still have reached this instance after its last
		// look (a read Redis answered as its connection was closed): hand
		// it back rather than leave it to OUTBOX_CLAIM_AFTER.
		left := b.handBack(ctx)
		wait(ctx, activity)
		if left > 0 {
			return fmt.Errorf("%w: %d replies handed back", ErrNotDrained, left)
		}
		return nil
	}
	b.cancel() // abort sends, backoffs and pauses still under way

	left := handBackReserve
	if deadline, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(deadline))
	}
	end, cancelEnd := context.WithTimeout(context.WithoutCancel(ctx), left)
	defer cancelEnd()
	// The senders return at once unless a Redis call or a Sender hangs;
	// wait for them up to half the time left, so that what they were
	// sending is handed back after they let go of it.
	half, cancelHalf := context.WithTimeout(end, left/2)
	defer cancelHalf()
	wait(half, done)
	b.handBack(end)
	wait(end, activity)
	return fmt.Errorf("%w: %w", ErrNotDrained, drainCtx.Err())
}

// handBackReserve is the most of Close's time kept for handing back what
// was not sent; Close keeps a tenth of its time when that is less.
const handBackReserve = time.Second

// drainContext returns the context of Close's drain: ctx, ending
// handBackReserve (or a tenth of the time left, if less) before its
// deadline.
func drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-min(handBackReserve, time.Until(deadline)/10)))
}

// wait waits for done or for ctx to end, and reports whether done came.
func wait(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// handBack gives the replies this instance still holds back to the
// outbox (Outbox.Release), so that another instance sends them at once.
func (b *Bot) handBack(ctx context.Context) (handedBack int) {
	for g := range b.groups {
		n, err := b.outbox.Release(ctx, g)
		handedBack += n
		if err != nil {
			b.log.Warn().Err(err).Int("group_id", g).Msg("cannot hand back the replies not sent; another instance takes them over after OUTBOX_CLAIM_AFTER")
			continue
		}
		if n > 0 {
			b.log.Info().Int("group_id", g).Int("replies", n).Msg("shutdown: replies not sent handed back to the outbox")
		}
	}
	return handedBack
}

// Ready reports an error while a sender halted one of the tokens (VK
// refused a send with it), and, with Options.Tokens.Required, while a
// token is not yet accepted by VK's check (tokens.Checker.Problem).
func (b *Bot) Ready() error {
	var err error
	b.halted.Range(func(_, v any) bool {
		err = v.(error)
		return false
	})
	if err != nil {
		return err
	}
	return b.tokens.Problem()
}

// Tokens returns the state of every token checked (Options.Tokens), a
// token its sender halted showing Halted unless VK's check refused it.
func (b *Bot) Tokens() []tokens.Status {
	ts := b.tokens.Status()
	b.halted.Range(func(k, v any) bool {
		w := k.(*tokenWorker)
		for i := range ts {
			if s := &ts[i]; s.Group == w.group && s.Index == w.index && s.State < tokens.Halted {
				s.State, s.Err = tokens.Halted, v.(error)
			}
		}
		return true
	})
	return ts
}

// Stats is a snapshot of the bot's running totals.
type Stats struct {
	Received   int64 `json:"received"`   // messages counted, duplicates included
	Duplicates int64 `json:"duplicates"` // re-deliveries of a message already counted
	Ignored    int64 `json:"ignored"`    // messages not from a person, not counted (see Answered)
	Late       int64 `json:"late"`       // messages whose webhook answered 503 at its deadline while Redis was slow
	Sent       int64 `json:"sent"`       // replies VK accepted
	Retried    int64 `json:"retried"`    // send attempts that will be retried
	Dropped    int64 `json:"dropped"`    // replies VK refused for good
	DryRun     int64 `json:"dry_run"`    // replies logged instead of sent (dry-run)
	Unsent     int64 `json:"unsent"`     // replies this process stopped holding at shutdown
	// ActivityErrors counts failed Options.Activity calls.
	ActivityErrors int64 `json:"activity_errors"`
}

// Stats returns the bot's running totals.
func (b *Bot) Stats() Stats {
	return Stats{
		Received:   b.stats.received.Load(),
		Duplicates: b.stats.duplicates.Load(),
		Ignored:    b.stats.ignored.Load(),
		Late:       b.stats.late.Load(),
		Sent:       b.stats.sent.Load(),
		Retried:    b.stats.retried.Load(),
		Dropped:    b.stats.dropped.Load(),
		DryRun:     b.stats.dryRun.Load(),
		Unsent:     b.stats.unsent.Load(),

		ActivityErrors: b.stats.activityErrors.Load(),
	}
}
