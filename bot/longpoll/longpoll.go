// Package longpoll takes a community's events from VK's Bots Long Poll API
// and passes each message_new to the same callback.MessageHandler the
// webhook calls, decoded by the same callback decoder.
//
// A Poller loses no event the API still holds: it moves its ts past a batch
// of events only once every message of the batch was handled, saves that ts
// in a Store so that a restart resumes from it, and retries the same ts
// through a VK outage or a failing handler (the handler's dedupe makes the
// replay of events already handled harmless). Of several instances, only
// the one holding the community's lease in the Store polls; the others
// stand by and take over when its lease runs out.
//
// The failures of the Bots Long Poll API are handled as VK documents them,
// with one addition to avoid a gap:
//
//	failed 1  history out of date or partly lost: go on with the ts answered
//	failed 2  key expired: get a new key, keep the ts
//	failed 3  information lost: get a new key; the ts still held is asked
//	          first, and only if that fails again is the new ts taken
//
// The first failed answer is acted on at once; each further one in a row
// waits the backoff first (RetryBase, doubling up to RetryMax), so a VK
// that keeps answering failed does not get a groups.getLongPollServer
// call per answer. A failed answer is not a failed request: it does not
// lengthen the backoff of the next transport failure, and a batch handled
// ends both runs. An answer whose ts is not an event number (a JSON
// integer or a string of digits) is refused as a failed request, never
// sent back.
//
// vksdk's longpoll-bot package is not used: its Run first calls
// groups.setLongPollSettings with api_version 5.131 (it needs a token with
// the manage right and changes the community's settings), moves ts past a
// batch before the handlers have run, ends at the first network error or
// non-JSON answer, panics on a "failed" or "ts" of an unexpected JSON type,
// takes a new ts on failed 3, and waits on http.DefaultClient, which has no
// timeout.
package longpoll

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
	"github.com/SevereCloud/vksdk/v2/events"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/callback"
)

// Defaults for the zero fields of Options.
const (
	// DefaultWait is how long one long-poll request waits for events (VK
	// recommends 25 s; proxies often cut connections at 30 s).
	DefaultWait = 25 * time.Second
	// DefaultLeaseTTL is how long a lease lasts unless renewed; it is
	// renewed every third of it.
	DefaultLeaseTTL = 30 * time.Second
	// DefaultHandleTimeout bounds the handling of one message.
	DefaultHandleTimeout = 5 * time.Second
	// DefaultWorkers is how many messages of one answer are handled at once.
	DefaultWorkers = 8
	// DefaultRetryBase and DefaultRetryMax bound the backoff after a
	// failure.
	DefaultRetryBase = 200 * time.Millisecond
	DefaultRetryMax  = 30 * time.Second
)

// MinWait and MaxWait are the shortest and longest wait of one long-poll
// request VK accepts (whole seconds).
const (
	MinWait = time.Second
	MaxWait = 90 * time.Second
)

// storeTimeout bounds each call of the Store (the lease and the ts), well
// below the Redis client's own timeout (REDIS_TIMEOUT, long enough to outlast
// a stall): a call that Redis answers late is given up and made again on the
// next round, as each is safe to repeat, and a stalled Redis holds a
// stopping poller for no longer than this per call.
const storeTimeout = 2 * time.Second

// Options configure a Poller. Zero fields mean the defaults.
type Options struct {
	// GroupID is the community, > 0.
	GroupID int
	// API calls groups.getLongPollServer with the community's token.
	API *api.VK
	// Handler gets every message_new event's message.
	Handler callback.MessageHandler
	// Store keeps the lease and the ts.
	Store Store
	// Owner names this poller in the lease; "" means a random name.
	Owner string
	// Wait is how long one request waits for events (default DefaultWait,
	// whole seconds, at most MaxWait).
	Wait time.Duration
	// LeaseTTL is how long the lease lasts unless renewed (default
	// DefaultLeaseTTL). A standby instance checks the lease every
	// LeaseTTL/3, so it takes over from one that died within LeaseTTL +
	// LeaseTTL/3 plus one Store call's limit (2 s): 42 s by default.
	LeaseTTL time.Duration
	// HandleTimeout bounds Handler.HandleMessage (default
	// DefaultHandleTimeout).
	HandleTimeout time.Duration
	// Workers is how many messages of one answer are handled at once
	// (default DefaultWorkers). Messages with the same Key are handled one
	// after another, in the order VK lists them.
	Workers int
	// Key says which messages must keep their order: the bot's text key
	// (bot.TextKey, "the same message"). Nil keeps the order of all
	// messages, as Workers 1 does.
	Key func(callback.Message) string
	// RetryBase and RetryMax bound the exponential backoff after a failed
	// request or message.
	RetryBase, RetryMax time.Duration
	// Client makes the long-poll requests (default: a client whose timeout
	// is Wait plus 15 s).
	Client *http.Client
	// Logger gets failures and take-overs; the zero Logger logs nothing.
	Logger zerolog.Logger
}

// A Poller takes one community's events from the Bots Long Poll API. Run
// it once; it is not safe for concurrent Runs.
type Poller struct {
	opts  Options
	log   zerolog.Logger
	stats stats
}

type stats struct {
	requests, events, messages, skipped, retries, failed1, failed2, failed3, sessions atomic.Int64
	polling                                                                           atomic.Bool
}

// Stats are a Poller's running totals.
type Stats struct {
	Requests int64 `json:"requests"` // long-poll answers received
	Events   int64 `json:"events"`   // events received, re-received ones included
	Messages int64 `json:"messages"` // messages handled
	Skipped  int64 `json:"skipped"`  // malformed or foreign events skipped
	Retries  int64 `json:"retries"`  // failed requests and messages retried
	Failed1  int64 `json:"failed_1"`
	Failed2  int64 `json:"failed_2"`
	Failed3  int64 `json:"failed_3"`
	Sessions int64 `json:"sessions"` // times this poller took the lease
	Polling  bool  `json:"polling"`  // this poller holds the lease now
}

// New returns a Poller for opts.
func New(opts Options) (*Poller, error) {
	switch {
	case opts.GroupID <= 0:
		return nil, fmt.Errorf("longpoll: group id %d: must be positive", opts.GroupID)
	case opts.API == nil || opts.Handler == nil || opts.Store == nil:
		return nil, errors.New("longpoll: API, Handler and Store are required")
	case opts.Wait < 0 || opts.Wait > MaxWait || opts.Wait%time.Second != 0:
		return nil, fmt.Errorf("longpoll: wait %v: must be whole seconds, at most %ds", opts.Wait, MaxWait/time.Second)
	}
	if opts.Owner == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		opts.Owner = hex.EncodeToString(b)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.Wait, DefaultWait)
	def(&opts.LeaseTTL, DefaultLeaseTTL)
	def(&opts.HandleTimeout, DefaultHandleTimeout)
	def(&opts.RetryBase, DefaultRetryBase)
	def(&opts.RetryMax, DefaultRetryMax)
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Key == nil {
		opts.Workers = 1
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Wait + 15*time.Second}
	}
	log := opts.Logger.With().Int("group_id", opts.GroupID).Str("poller", opts.Owner).Logger()
	return &Poller{opts: opts, log: log}, nil
}

// Stats returns the Poller's running totals.
func (p *Poller) Stats() Stats {
	s := &p.stats
	return Stats{Requests: s.requests.Load(), Events: s.events.Load(), Messages: s.messages.Load(),
		Skipped: s.skipped.Load(), Retries: s.retries.Load(), Failed1: s.failed1.Load(),
		Failed2: s.failed2.Load(), Failed3: s.failed3.Load(), Sessions: s.sessions.Load(), Polling: s.polling.Load()}
}

// errLeaseLost ends a session whose lease another poller holds now.
var errLeaseLost = errors.New("longpoll: lease lost")

// Run polls until ctx ends, then releases the lease and returns nil. While
// another instance holds the lease, it stands by. Once ctx ended it hands
// the handler no further message, and it returns within a few seconds even
// while Redis stalls: each Store call is bounded by its own short deadline.
func (p *Poller) Run(ctx context.Context) error {
	var failures int
	for ctx.Err() == nil {
		held, err := p.hold(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				p.log.Error().Err(err).Msg("long poll: cannot take the lease; retrying")
				failures++
				p.sleep(ctx, p.backoff(failures))
			}
			continue
		case !held:
			p.sleep(ctx, p.opts.LeaseTTL/3)
			continue
		}
		failures = 0
		p.stats.sessions.Add(1)
		p.stats.polling.Store(true)
		p.log.Info().Msg("long poll: polling (this instance holds the lease)")
		err = p.session(ctx)
		p.stats.polling.Store(false)
		if errors.Is(err, errLeaseLost) {
			p.log.Warn().Msg("long poll: another instance took the lease over; standing by")
		}
	}
	release, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := p.opts.Store.Release(release, p.opts.GroupID, p.opts.Owner); err != nil {
		p.log.Warn().Err(err).Msg("long poll: lease not released; another instance takes over when it runs out")
	}
	return nil
}

// session polls while this poller holds the lease. It returns errLeaseLost
// when the lease is lost (the renewal or the saving of ts finds another
// owner, or no renewal succeeded for a whole LeaseTTL), nil when ctx ends.
func (p *Poller) session(parent context.Context) error {
	ctx, cancel := context.WithCancelCause(parent)
	renewed := make(chan struct{})
	go p.renew(ctx, cancel, renewed)
	defer func() {
		cancel(nil)
		<-renewed
	}()
	// keep saves ts; when the lease is found lost, it ends the session.
	keep := func(ts string) bool {
		if p.save(ctx, ts) {
			return true
		}
		cancel(errLeaseLost)
		return false
	}

	var (
		srv      *server
		ts       string
		tsKnown  bool
		failures int    // failed requests (or Store calls, or messages) in a row
		refusals int    // failed answers in a row
		lostTS   string // the ts that got failed 3, asked again once with a new key
	)
	fail := func(err error, msg string) {
		if ctx.Err() != nil {
			return
		}
		failures++
		p.stats.retries.Add(1)
		p.log.Warn().Err(err).Int("failures", failures).Msg(msg)
		p.sleep(ctx, p.backoff(failures))
	}
	for ctx.Err() == nil {
		if !tsKnown {
			saved, err := p.savedTS(ctx)
			if err != nil {
				fail(err, "long poll: cannot read the saved ts; retrying")
				continue
			}
			ts, tsKnown = saved, true
		}
		if srv == nil {
			s, err := p.server(ctx)
			if err != nil {
				fail(err, "long poll: groups.getLongPollServer failed; retrying")
				continue
			}
			srv = &s
			if ts == "" {
				// The first start ever: begin with the events from now on.
				ts = s.ts
				if !keep(ts) {
					continue
				}
			}
		}
		ans, err := p.check(ctx, srv, ts)
		if err != nil {
			fail(err, "long poll: request failed; retrying with the same ts")
			if failures%3 == 0 {
				srv = nil // perhaps the server moved: ask for it again
			}
			continue
		}
		if ans.failed != 0 {
			// An answer: the transport works, whatever it says.
			failures = 0
			refusals++
			if !p.paceRefusal(ctx, refusals, ans.failed) {
				continue
			}
		}
		switch ans.failed {
		case 0:
		case 1:
			p.stats.failed1.Add(1)
			if ans.ts == "" {
				fail(errors.New("failed 1 without a ts"), "long poll: malformed answer")
				continue
			}
			if ans.ts != ts {
				p.log.Warn().Str("ts", ts).Str("new_ts", ans.ts).
					Msg("long poll: failed 1, VK no longer holds the events from ts; going on from new_ts")
			}
			ts = ans.ts
			keep(ts)
			continue
		case 2:
			p.stats.failed2.Add(1)
			srv = nil
			continue
		case 3:
			p.stats.failed3.Add(1)
			s, err := p.server(ctx)
			if err != nil {
				srv = nil
				fail(err, "long poll: groups.getLongPollServer failed; retrying")
				continue
			}
			srv = &s
			if lostTS == ts {
				p.log.Warn().Str("ts", ts).Str("new_ts", s.ts).
					Msg("long poll: failed 3 twice for the same ts; going on from the new ts")
				ts = s.ts
				keep(ts)
				continue
			}
			lostTS = ts
			continue
		default:
			p.log.Warn().Int("failed", ans.failed).Msg("long poll: unknown failure; getting a new key")
			srv = nil
			continue
		}
		if err := p.handle(ctx, ans.updates); err != nil {
			fail(err, "long poll: a message was not handled; asking for the same events again")
			continue
		}
		failures, refusals, lostTS = 0, 0, ""
		ts = ans.ts
		keep(ts)
	}
	if errors.Is(context.Cause(ctx), errLeaseLost) {
		return errLeaseLost
	}
	return nil
}

// paceRefusal waits before acting on the n-th failed answer in a row
// (failed is its code): not before the first, which VK's protocol expects
// to be acted on at once, then the backoff of n-1 failures. It reports
// false when ctx ended meanwhile.
func (p *Poller) paceRefusal(ctx context.Context, n, failed int) bool {
	if n < 2 {
		return true
	}
	d := p.backoff(n - 1)
	p.log.Warn().Int("failed", failed).Int("in_a_row", n).Dur("wait", d).
		Msg("long poll: VK keeps answering failed; waiting before acting on it")
	p.sleep(ctx, d)
	return ctx.Err() == nil
}

// save stores ts. A failure to store it is logged and otherwise ignored:
// at worst a restart asks for events already handled again. It reports
// false when this poller no longer holds the lease (ts was not saved); the
// session then ends, as it does when the renewal finds the lease lost.
func (p *Poller) save(ctx context.Context, ts string) bool {
	// Not cancelled with ctx: a shutdown right after a batch was handled
	// must still record it, or the next start handles it again.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	ok, err := p.opts.Store.SaveTS(sctx, p.opts.GroupID, p.opts.Owner, ts)
	if err != nil {
		p.log.Warn().Err(err).Str("ts", ts).Msg("long poll: cannot save the ts; a restart would ask for these events again")
		return true
	}
	if !ok {
		// The renewer would notice too; stop now rather than poll one more time.
		p.log.Warn().Str("ts", ts).Msg("long poll: the lease was lost before the ts was saved")
	}
	return ok
}

// hold takes or renews the lease, within storeTimeout.
func (p *Poller) hold(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return p.opts.Store.Hold(ctx, p.opts.GroupID, p.opts.Owner, p.opts.LeaseTTL)
}

// savedTS reads the saved ts, within storeTimeout.
func (p *Poller) savedTS(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return p.opts.Store.TS(ctx, p.opts.GroupID)
}

// renew keeps the lease while ctx lasts; when it is lost, or cannot be
// renewed for a whole LeaseTTL, it cancels ctx with errLeaseLost.
func (p *Poller) renew(ctx context.Context, cancel context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(p.opts.LeaseTTL / 3)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, err := p.hold(ctx)
		switch {
		case err == nil && held:
			last = time.Now()
			continue
		case err != nil && time.Since(last) < p.opts.LeaseTTL:
			continue // the lease may still be ours: keep polling, dedupe covers an overlap
		}
		cancel(errLeaseLost)
		return
	}
}

// handle passes the message of every message_new event in updates to the
// handler: those with the same Key in order, the others up to Workers at
// once. A malformed or foreign event is skipped: asking for it again would
// bring the same bytes. The error is the first message not handled.
func (p *Poller) handle(ctx context.Context, updates []json.RawMessage) error {
	lanes := make([][]callback.Message, p.opts.Workers)
	for _, raw := range updates {
		p.stats.events.Add(1)
		ev, err := callback.DecodeEvent(raw)
		if err != nil {
			p.skip(err, raw)
			continue
		}
		if ev.Type != events.EventMessageNew {
			continue
		}
		if ev.GroupID != p.opts.GroupID {
			p.skip(fmt.Errorf("event of group_id %d", ev.GroupID), raw)
			continue
		}
		m, err := ev.Message()
		if err != nil {
			p.skip(err, raw)
			continue
		}
		lane := 0
		if len(lanes) > 1 {
			h := fnv.New32a()
			h.Write([]byte(p.opts.Key(m)))
			lane = int(h.Sum32() % uint32(len(lanes)))
		}
		lanes[lane] = append(lanes[lane], m)
	}
	errs := make([]error, len(lanes))
	var wg sync.WaitGroup
	for i, lane := range lanes {
		if len(lane) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.handleLane(ctx, lane)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// handleLane handles messages one after another, stopping at the first
// that fails, or once ctx ended: a poller being stopped hands the handler
// no further message.
func (p *Poller) handleLane(ctx context.Context, messages []callback.Message) error {
	for _, m := range messages {
		if err := ctx.Err(); err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, p.opts.HandleTimeout)
		err := p.opts.Handler.HandleMessage(hctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("event %s: %w", m.EventID, err)
		}
		p.stats.messages.Add(1)
	}
	return nil
}

func (p *Poller) skip(err error, raw json.RawMessage) {
	p.stats.skipped.Add(1)
	p.log.Error().Err(err).Int("bytes", len(raw)).Msg("long poll: event skipped")
}

func (p *Poller) backoff(failures int) time.Duration {
	d := p.opts.RetryBase << min(failures-1, 20)
	return min(d, p.opts.RetryMax)
}

func (p *Poller) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
