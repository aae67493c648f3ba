package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/connlimit"
	"github.com/vkcounter/vkcounter/internal/ratelog"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/metrics"
)

// httpPart is the public HTTP server (the webhook, /counters/, /healthz)
// and the admin one (/metrics, /stats, /readyz, the status page).
type httpPart struct {
	webhook  *callback.Handler // its refusals by reason are read for /stats and /metrics
	httpLn   net.Listener
	httpSrv  *http.Server
	adminLn  net.Listener
	adminSrv *http.Server
	serving  sync.WaitGroup
}

// close stops accepting requests and waits, within ctx, for those under
// way to finish.
func (p *httpPart) close(ctx context.Context) error {
	var errs []error
	for _, srv := range []struct {
		s  *http.Server
		ln net.Listener
	}{{p.httpSrv, p.httpLn}, {p.adminSrv, p.adminLn}} {
		if srv.s != nil {
			if err := srv.s.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
		} else if srv.ln != nil {
			srv.ln.Close()
		}
	}
	p.serving.Wait()
	return errors.Join(errs...)
}

// openHTTP opens the HTTP side (httpPart): the routes, with the webhook
// of every community, on the public server (HTTP_ADDR) and the admin one
// (ADMIN_ADDR).
func (m *Main) openHTTP(ctx context.Context, communities []config.Community) (err error) {
	m.http = &httpPart{}
	m.opened(m.http)
	public, adm, err := m.routes(m.callbackGroups(ctx, communities))
	if err != nil {
		return err
	}
	maxConns := m.httpConnLimit(openFileLimit())
	if m.http.httpLn, m.http.httpSrv, err = m.serveHTTP("HTTP_ADDR", m.cfg.HTTPAddr, maxConns, public); err != nil {
		return err
	}
	m.http.adminLn, m.http.adminSrv, err = m.serveHTTP("ADMIN_ADDR", m.cfg.AdminAddr, maxConns, adm)
	return err
}

// serveHTTP listens on addr (the setting named env) and serves h there,
// at most maxConns connections at once (0: no limit): more are answered
// 503 with Retry-After and closed (connlimit). The server's own errors (a
// failed accept, a broken TLS handshake) go to the service's log, at most
// one line per FailureLogEvery.
func (m *Main) serveHTTP(env, addr string, maxConns int, h http.Handler) (net.Listener, *http.Server, error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", env, err)
	}
	full := ratelog.New(m.log.With().Str("server", env).Int("max", maxConns).Logger(), FailureLogEvery)
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
	m.http.serving.Add(1)
	go func() {
		defer m.http.serving.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error().Err(err).Str("server", env).Msg("HTTP server stopped")
		}
	}()
	return ln, srv, nil
}

// routes returns the public handler (the webhook, the token-guarded
// counters API, /healthz) and the admin one (package admin: the status
// page at /, /metrics, /stats, /texts, /readyz, /healthz), served on
// separate addresses so that nothing private sits on the public port.
func (m *Main) routes(groups []callback.Group) (public, adm http.Handler, err error) {
	cb, err := callback.NewHandler(m.bot.bot, callback.Options{Groups: groups, MaxBodyBytes: m.cfg.MaxBodyBytes,
		Timeout: m.cfg.WebhookTimeout, Logger: m.log})
	if err != nil {
		return nil, nil, err
	}
	m.http.webhook = cb
	api, err := httpapi.New(m.counters.stores, httpapi.Options{Token: m.cfg.CountersHTTPToken, Logger: m.log})
	if err != nil {
		return nil, nil, err
	}
	pub := http.NewServeMux()
	if m.cfg.VKMode == config.ModeCallback {
		pub.Handle(m.cfg.CallbackPath, m.metrics.Webhook(cb))
	}
	pub.Handle(httpapi.Prefix, m.metrics.CountersHTTP(api))
	pub.HandleFunc("GET /healthz", admin.Healthz)
	if m.admin, err = admin.New(admin.Options{Source: adminSource{m}, Readiness: m.readiness, History: m.history,
		Texts:   admin.TextsOptions{Counter: m.bot.store, Groups: m.bot.groups, Normalize: m.cfg.Normalize, Timeout: m.cfg.RedisTimeout},
		Metrics: m.metrics.Handler(), Redactor: m.redact}); err != nil {
		return nil, nil, err
	}
	return pub, m.admin.Handler(), nil
}

// newReadiness is the service's readiness (admin.Readiness: /readyz, the
// status page, the readiness metrics). Redis answers when a call of the
// service's own was answered within restFor with none failed since
// (redisconn.Answered), or else a PING within the check's second. On a
// cluster, each slot range that cannot be reached is named
// (redisconn.CheckSlots). A Redis that answers but refuses writes
// (writable, from the last readMemory) or evicted keys (evicted) is a
// reason too, and so is VK refusing a token (or, with REQUIRE_VK_TOKEN,
// not having accepted it yet: bot.Bot.Ready). A VK outage does not make
// the service unready: the outbox keeps the replies until VK is back, and
// the webhook goes on counting. /readyz reads the server's memory and
// evictions first when due (readServer).
func (m *Main) newReadiness() *admin.Readiness {
	return &admin.Readiness{
		Redis: func(ctx context.Context) error {
			if redisconn.Answered(m.redis.rdb, restFor) {
				return nil
			}
			return m.redis.rdb.Ping(ctx).Err()
		},
		Slots: func(ctx context.Context) error { return redisconn.CheckSlots(ctx, m.redis.rdb) },
		Server: []func() error{
			func() error { _, err := m.writable(); return err },
			m.evicted,
		},
		VK:      func() error { return m.bot.bot.Ready() },
		Refresh: m.readServer,
	}
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

// readServer reads the bot's Redis's memory (readMemory) and evictions
// (readEvictions) when serverEvery has passed since the last try, Redis
// refuses writes (writable), or its policy may evict keys (then at each
// call): a probe every 15 s costs nothing while all is well. Run reads
// once at start.
func (m *Main) readServer(ctx context.Context) {
	last := m.redis.serverRead.Load()
	if _, err := m.writable(); err == nil && len(m.redis.evictions.evicting) == 0 && last != 0 && time.Since(time.Unix(0, last)) < serverEvery {
		return
	}
	if !m.redis.serverRead.CompareAndSwap(last, time.Now().UnixNano()) {
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
	r := metrics.Readiness{Tokens: m.bot.bot.Tokens()}
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	if time.Since(m.readyAt) < healthEvery && m.bot.bot.Ready() == nil {
		return r // ready, as last read
	}
	reasons, redisErr := m.readiness.Check(ctx)
	r.NotReady, r.RedisDown = errors.Join(reasons...), redisErr != nil
	if r.NotReady == nil {
		m.readyAt = time.Now()
	}
	return r
}

// HTTPAddr is the address the public HTTP server listens on.
func (m *Main) HTTPAddr() string { return m.http.httpLn.Addr().String() }

// AdminAddr is the address the admin HTTP server listens on.
func (m *Main) AdminAddr() string { return m.http.adminLn.Addr().String() }
