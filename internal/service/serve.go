// Package service is the running vkcounter service: the webhook or the
// Long Poll pollers, the bot and its senders, the counter port, the HTTP
// API and the admin server over one Redis (or the embedded one). New
// takes the checked settings (internal/config) and a logger; Run opens the
// parts, each by its own constructor in its own file, in the order they
// depend on one another, and Close closes them in reverse. cmd/vkcounter
// reads the settings and runs it; tests run it on :0 ports
// (internal/servicetest).
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/redact"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/version"
	"github.com/vkcounter/vkcounter/metrics"
)

// Main is the whole `vkcounter serve` process: Run opens its parts (see
// parts) and starts serving, Close shuts them down gracefully, in reverse
// order. Tests run it on :0 ports.
type Main struct {
	cfg     config.Config
	log     zerolog.Logger
	redact  *redact.Redactor // the secrets of cfg, for what the admin server serves
	metrics *metrics.Metrics

	// The parts, each opened by its constructor (Run) and closed in
	// reverse of parts, the order they were opened in.
	redis    *redisPart
	counters *countersPart
	bot      *botPart
	http     *httpPart
	port     *portPart
	longpoll *pollersPart
	workers  *background
	parts    []part

	started time.Time      // when Run began
	dryRun  bool           // no community has a token
	history *admin.History // messages and replies per minute, for the status page

	readiness *admin.Readiness // newReadiness
	admin     *admin.Admin     // the admin server's routes (routes)

	healthMu sync.Mutex // guards readyAt
	readyAt  time.Time  // when health last found the service ready (see healthEvery)

	closeOnce sync.Once
	closeErr  error
}

// New returns a Main for cfg; nothing is opened until Run. log should
// write through config.Redactor(cfg), which removes every secret of cfg.
func New(cfg config.Config, log zerolog.Logger) *Main {
	m := &Main{cfg: cfg, log: log, redact: config.Redactor(cfg), metrics: metrics.New(), history: admin.NewHistory()}
	m.readiness = m.newReadiness()
	return m
}

// Run connects to Redis, loads the script, starts the bot and listens.
// It returns once everything is serving; on error, whatever was opened is
// closed.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	m.started = time.Now()
	communities, err := m.cfg.Communities()
	if err != nil {
		return err
	}
	m.dryRun = isDryRun(communities)
	// The parts in the order they depend on one another; Close closes
	// them in reverse.
	for _, open := range []func(context.Context) error{
		m.openRedis,
		m.openCounters,
		func(ctx context.Context) error { return m.openBot(ctx, communities) },
		func(ctx context.Context) error { return m.openHTTP(ctx, communities) },
		m.openPort,
		func(context.Context) error { return m.openPollers(communities) },
		m.openWorkers,
	} {
		if err := open(ctx); err != nil {
			return err
		}
	}
	m.observe()
	m.warnRisky(ctx, communities)
	readCtx, cancel := context.WithTimeout(ctx, time.Second)
	m.readServer(readCtx) // the first reading, so that an idle service's probes send nothing
	cancel()
	v := version.Get()
	m.log.Info().Str("version", v.Version).Str("revision", v.Revision).Str("http", m.HTTPAddr()).Str("admin", m.AdminAddr()).Str("counters", m.CounterAddr()).Ints("groups", m.bot.groups).Str("mode", m.cfg.VKMode).Func(m.callbackField).
		Str("redis", m.redisKind()).Stringer("window", m.cfg.Window).Bool("dry_run", m.dryRun).
		Msg("vkcounter serving")
	return nil
}

// observe hands the metrics what they read of the open parts.
func (m *Main) observe() {
	m.metrics.ObserveOutbox(func() outbox.Stats { return m.bot.outbox.Total(m.bot.groups...) }, m.bot.outbox.Redeliveries, m.bot.bot.ConsecutiveVKFailures)
	m.metrics.ObserveReadiness(func() metrics.Readiness { return m.health(context.Background()) })
	m.metrics.ObserveHeadroom(m.counters.guard.Refusals, func() bool { return m.counters.guard.Last().Full() }, func() bool { return m.counters.guard.Unknown() != nil })
	m.metrics.ObserveRedisRefusals(redisconn.Causes, redisconn.Refusals)
	m.metrics.ObserveGrowthRefusals(m.counters.guard.GrowthRefusals, m.counters.keyCap.Refusals)
	m.metrics.ObserveRedisWrites(&m.redis.writes, m.refusingWrites)
	m.metrics.ObserveWebhookRejections(m.http.webhook.Rejected)
}

// callbackField adds the webhook's path to the start-up line, in callback
// mode only: in long-poll mode it is not served.
func (m *Main) callbackField(e *zerolog.Event) {
	if m.cfg.VKMode == config.ModeCallback {
		e.Str("callback", m.cfg.CallbackPath)
	}
}

// fdHeadroom is the number of open files kept for everything but counter
// connections: the HTTP servers' connections, Redis's pool, files.
const fdHeadroom = 1024

// fdReserve is the number of open files kept for Redis's pools and files
// when the HTTP servers' share is computed (httpConnLimit).
const fdReserve = 256

// minHTTPConnections is the least httpConnLimit lowers HTTP_MAX_CONNECTIONS
// to, however few open files there are.
const minHTTPConnections = 16

// counterRoom is the most counter connections fdLimit open files leave
// room for.
func counterRoom(fdLimit int) int { return max(fdLimit-fdHeadroom, fdLimit/2) }

// counterConnLimit is COUNTER_MAX_CONNECTIONS, lowered so that counter
// connections can never use up the open files the webhook and Redis need
// (fdLimit; 0 if unknown). Both the lowering and an unlimited setting are
// warned about.
func (m *Main) counterConnLimit(fdLimit int) int {
	n := m.cfg.CounterMaxConnections
	if fdLimit <= 0 {
		return n
	}
	return m.fitConnLimit("COUNTER_MAX_CONNECTIONS", "counter", "HTTP and Redis", n, counterRoom(fdLimit), fdLimit)
}

// httpConnLimit is HTTP_MAX_CONNECTIONS (for each of the two HTTP
// servers), lowered so that both servers' connections, the counter port's
// (at its limit) and fdReserve files fit in fdLimit open files (0 if
// unknown), but not below minHTTPConnections. Both the lowering and an
// unlimited setting are warned about.
func (m *Main) httpConnLimit(fdLimit int) int {
	n := m.cfg.HTTPMaxConnections
	if fdLimit <= 0 {
		return n
	}
	counter := 0
	if m.cfg.CounterAddr != CounterOff {
		counter = counterRoom(fdLimit)
		if c := m.cfg.CounterMaxConnections; c > 0 {
			counter = min(c, counter)
		}
	}
	room := max((fdLimit-counter-fdReserve)/2, minHTTPConnections)
	return m.fitConnLimit("HTTP_MAX_CONNECTIONS", "HTTP", "the counter port and Redis", n, room, fdLimit)
}

// fitConnLimit returns the connection limit n of setting lowered to room,
// warning when it is lowered (to leave open files for others) or
// unlimited (0) in fdLimit open files.
func (m *Main) fitConnLimit(setting, kind, others string, n, room, fdLimit int) int {
	switch {
	case n == 0:
		m.log.Warn().Int("open_file_limit", fdLimit).Msg(setting + "=0: " + kind + " connections are unlimited and can use up the open files the webhook and Redis need")
	case n > room:
		m.log.Warn().Int("configured", n).Int("used", room).Int("open_file_limit", fdLimit).
			Msg(setting + " lowered to leave open files for " + others)
		n = room
	}
	return n
}

func isDryRun(cs []config.Community) bool {
	for _, c := range cs {
		if len(c.Tokens()) > 0 {
			return false
		}
	}
	return true
}

// maxPoll is how long a sender with nothing to send waits in Redis for new
// replies: a new reply ends the wait at once, so it only sets how often an
// idle sender asks Redis again (a read, and the takeover step due every
// OUTBOX_CLAIM_AFTER, which also reads the replies set aside: two
// commands), the idle bill a command-priced plan charges (BENCHMARKS.md). While nothing flows, a dead instance's replies
// are taken over up to maxPoll late; a busy sender scans every
// OUTBOX_CLAIM_AFTER. Shutdown does not wait for it: Close ends a waiting
// read at once by closing its connection.
const maxPoll = 2 * time.Minute

// Close shuts down within SHUTDOWN_TIMEOUT, closing the parts in reverse
// order: the background workers stop; the HTTP servers stop accepting
// webhooks and finish the requests in flight; the pollers stop and the
// bot drains the reply outbox; the counter connections close (releasing
// their holdings), then the counters' stores and Redis; the bot's Redis
// last.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	for i := len(m.parts) - 1; i >= 0; i-- {
		if err := m.parts[i].close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftInOutbox tells what a shutdown that did not drain the outbox (err,
// wrapping bot.ErrNotDrained) leaves behind, asking Redis within what is
// left of the shutdown (ctx). With a real Redis the replies wait there for
// the next start or another instance: logged, not a failure. With the
// embedded Redis they are lost with the process: a failure. When Redis
// does not answer in time, it says that their number is unknown.
func (m *Main) leftInOutbox(ctx context.Context, err error) error {
	if !errors.Is(err, bot.ErrNotDrained) {
		return err
	}
	left, lerr := int64(0), error(nil)
	for _, g := range m.bot.groups {
		n, e := m.bot.outbox.Len(ctx, g)
		if e != nil {
			lerr = e
			break
		}
		left += n
	}
	if lerr != nil {
		if m.redis.embedded != nil {
			return lostWithEmbedded(-1, err)
		}
		// No count rather than a made-up one: the senders' last reading
		// of the stream leaves out the replies set aside for a retry.
		m.log.Warn().Err(lerr).Stringer("timeout", m.cfg.ShutdownTimeout).
			Msg("shutdown: replies not sent in time stay in the outbox, how many is unknown (Redis did not answer within the shutdown); the next start or another instance sends them")
		return nil
	}
	if m.redis.embedded != nil {
		return lostWithEmbedded(left, err)
	}
	m.log.Warn().Int64("replies_left", left).Stringer("timeout", m.cfg.ShutdownTimeout).
		Msg("shutdown: replies not sent in time stay in the outbox; the next start or another instance sends them")
	return nil
}

// lostWithEmbedded is the shutdown error for left replies (-1: unknown)
// lost with the embedded Redis.
func lostWithEmbedded(left int64, err error) error {
	if left < 0 {
		return fmt.Errorf("the replies not sent before SHUTDOWN_TIMEOUT are lost with the embedded Redis: %w", err)
	}
	if left == 1 {
		return fmt.Errorf("1 reply not sent before SHUTDOWN_TIMEOUT is lost with the embedded Redis: %w", err)
	}
	return fmt.Errorf("%d replies not sent before SHUTDOWN_TIMEOUT are lost with the embedded Redis: %w", left, err)
}
