package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/internal/connlimit"
	"github.com/vkcounter/vkcounter/internal/ratelog"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/metrics"
)

// serveHTTP listens on addr (the setting named env) and serves h there,
// at most maxConns connections at once (0: no limit): more are answered
// 503 with Retry-After and closed (connlimit). The server's own errors (a
// failed accept, a broken TLS handshake) go to the service's log, at most
// one line per failureLogEvery.
func (m *Main) serveHTTP(env, addr string, maxConns int, h http.Handler) (net.Listener, *http.Server, error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", env, err)
	}
	full := ratelog.New(m.log.With().Str("server", env).Int("max", maxConns).Logger(), failureLogEvery)
	ln := connlimit.New(inner, maxConns, connlimit.HTTPRefusal(callback.DefaultRetryAfter), func() {
		full.Warn().Msg("HTTP connection refused: HTTP_MAX_CONNECTIONS are open")
	})
	srv := &http.Server{Handler: h,
		// A client gets little time to send its request and take the answer
		// (the webhook answers within WEBHOOK_TIMEOUT and cuts a slow body
		// sooner), and idle kept-alive connections are closed, so slow or
		// idle clients cannot hold open files and goroutines without bound.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      m.cfg.WebhookTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          serverErrorLog(m.log, env),
	}
	m.httpPart.serving.Add(1)
	go func() {
		defer m.httpPart.serving.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error().Err(err).Str("server", env).Msg("HTTP server stopped")
		}
	}()
	return ln, srv, nil
}

// routes returns the public handler (the webhook, the token-guarded
// counters API, /healthz) and the admin one (the status page at /,
// /metrics, /stats, /texts, /readyz, /healthz), served on separate addresses so that nothing private sits on
// the public port.
func (m *Main) routes(groups []callback.Group) (public, admin http.Handler, err error) {
	cb, err := callback.NewHandler(m.bot, callback.Options{Groups: groups, MaxBodyBytes: m.cfg.MaxBodyBytes,
		Timeout: m.cfg.WebhookTimeout, Logger: m.log})
	if err != nil {
		return nil, nil, err
	}
	m.webhook = cb
	api, err := httpapi.New(m.stores, httpapi.Options{Token: m.cfg.CountersHTTPToken, Logger: m.log})
	if err != nil {
		return nil, nil, err
	}
	healthz := func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }
	pub := http.NewServeMux()
	if m.cfg.VKMode == ModeCallback {
		pub.Handle(m.cfg.CallbackPath, m.metrics.Webhook(cb))
	}
	pub.Handle(httpapi.Prefix, m.metrics.CountersHTTP(api))
	pub.HandleFunc("GET /healthz", healthz)
	adm := http.NewServeMux()
	adm.Handle("GET /metrics", m.metrics.Handler())
	adm.HandleFunc("GET /healthz", healthz)
	// What is served with free text (errors, VK's answers, texts) goes
	// out through the one redactor.
	adm.HandleFunc("GET /readyz", m.redacted(m.readyz))
	adm.HandleFunc("GET /stats", m.redacted(m.stats))
	adm.HandleFunc("GET /texts", m.redacted(m.texts))
	adm.HandleFunc("GET /{$}", m.redacted(m.statusPage))
	return pub, adm, nil
}

// readiness returns every reason the service cannot take traffic (none:
// it is ready) and whether Redis answers (nil: it does): a call of the
// service's own answered within restFor with none failed since
// (redisconn.Answered), or else a PING answered within a second. On a cluster, each slot range that cannot be reached is named
// (redisconn.CheckSlots). A Redis that answers but refuses writes
// (writable, from the last readMemory) is a reason too, and so is VK
// refusing a token (or, with REQUIRE_VK_TOKEN, not having accepted it yet:
// bot.Bot.Ready). A VK outage does not make the service unready: the
// outbox keeps the replies until VK is back, and the webhook goes on
// counting.
func (m *Main) readiness(ctx context.Context) (reasons []error, redisErr error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if !redisconn.Answered(m.rdb, restFor) {
		redisErr = m.rdb.Ping(ctx).Err()
	}
	if redisErr != nil {
		reasons = append(reasons, fmt.Errorf("redis: %w", redisErr))
	}
	if err := redisconn.CheckSlots(ctx, m.rdb); err != nil {
		reasons = append(reasons, fmt.Errorf("redis cluster: %w", err))
	}
	if redisErr == nil {
		if _, err := m.writable(); err != nil {
			reasons = append(reasons, fmt.Errorf("redis: %w", err))
		}
		if err := m.evicted(); err != nil {
			reasons = append(reasons, fmt.Errorf("redis: %w", err))
		}
	}
	if err := m.bot.Ready(); err != nil {
		reasons = append(reasons, fmt.Errorf("vk: %w", err))
	}
	return reasons, redisErr
}

// restFor is how long readiness rests on a call of the service's own that
// Redis answered (none failed since) instead of a PING: longer than an
// idle sender's wait for new replies (maxPoll), after which its next read
// and takeover scan are answered. A Redis that stalls with its connections
// open goes unseen that long; one that refuses or drops them is seen at
// the next call that fails.
const restFor = maxPoll + 30*time.Second

// serverEvery is how often /readyz reads the server's memory (INFO memory)
// and, under an evicting policy, its evictions (INFO stats) while all is
// well: at every /readyz while the last reading or a refused write says
// Redis refuses writes.
const serverEvery = 10 * time.Minute

// ready returns why the service cannot take traffic (every reason of
// readiness, one per line, after reading Redis's memory and evictions
// when due: readServer), or nil: Redis does not answer within a second or
// refuses writes, or VK refuses a token.
func (m *Main) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second) // one second for both
	defer cancel()
	m.readServer(ctx)
	reasons, _ := m.readiness(ctx)
	return errors.Join(reasons...)
}

// readServer reads the bot's Redis's memory (readMemory) and evictions
// (readEvictions) when serverEvery has passed since the last try, Redis
// refuses writes (writable), or its policy may evict keys (then at each
// call): a probe every 15 s costs nothing while all is well. Run reads
// once at start.
func (m *Main) readServer(ctx context.Context) {
	last := m.serverRead.Load()
	if _, err := m.writable(); err == nil && len(m.evictions.evicting) == 0 && last != 0 && time.Since(time.Unix(0, last)) < serverEvery {
		return
	}
	if !m.serverRead.CompareAndSwap(last, time.Now().UnixNano()) {
		return // another probe reads now
	}
	m.readMemory(ctx)
	m.readEvictions(ctx)
}

// healthEvery is how long the readiness metrics reuse a reading that found
// the service ready, while the bot stays ready. A reading that found it
// not ready is taken afresh at each scrape.
const healthEvery = 30 * time.Second

// health is readiness as the readiness metrics show it, with the state
// of every token (bot.Bot.Tokens, which /stats shows too).
func (m *Main) health(ctx context.Context) metrics.Readiness {
	r := metrics.Readiness{Tokens: m.bot.Tokens()}
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	if time.Since(m.readyAt) < healthEvery && m.bot.Ready() == nil {
		return r // ready, as last read
	}
	reasons, redisErr := m.readiness(ctx)
	r.NotReady, r.RedisDown = errors.Join(reasons...), redisErr != nil
	if r.NotReady == nil {
		m.readyAt = time.Now()
	}
	return r
}

func (m *Main) readyz(w http.ResponseWriter, r *http.Request) {
	if err := m.ready(r.Context()); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// HTTPAddr is the address the public HTTP server listens on.
func (m *Main) HTTPAddr() string { return m.httpLn.Addr().String() }

// AdminAddr is the address the admin HTTP server listens on.
func (m *Main) AdminAddr() string { return m.adminLn.Addr().String() }
