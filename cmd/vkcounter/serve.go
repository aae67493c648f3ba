package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/metrics"
)

// Main is the whole `vkcounter serve` process: Run opens everything and
// starts serving, Close shuts it down gracefully. Tests run it on :0 ports.
type Main struct {
	cfg Config
	log zerolog.Logger

	mini    *miniredis.Miniredis // embedded Redis when no REDIS_URL / REDIS_CLUSTER
	rdb     redis.UniversalClient
	store   *freq.Store
	bot     *bot.Bot
	metrics *metrics.Metrics

	httpLn  net.Listener
	httpSrv *http.Server
	wg      sync.WaitGroup // serving goroutines
}

// NewMain returns a Main for cfg; nothing is opened until Run.
func NewMain(cfg Config, log zerolog.Logger) *Main {
	return &Main{cfg: cfg, log: log, metrics: metrics.New()}
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
	if err := m.openRedis(ctx); err != nil {
		return err
	}
	m.store = freq.New(m.rdb, freq.Options{Window: m.cfg.Window, Prefix: m.cfg.KeyPrefix + "f:"})
	if err := m.store.Load(ctx); err != nil {
		return fmt.Errorf("load the counting script: %w", err)
	}
	communities, err := m.cfg.Communities()
	if err != nil {
		return err
	}
	if m.bot, err = m.newBot(communities); err != nil {
		return err
	}
	m.metrics.GaugeFunc("reply_queue_depth", "Replies waiting to be sent.", func() float64 { return float64(m.bot.Stats().Queued) })
	handler, err := m.routes(communities)
	if err != nil {
		return err
	}
	if m.httpLn, err = net.Listen("tcp", m.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	m.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.httpSrv.Serve(m.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error().Err(err).Msg("HTTP server stopped")
		}
	}()
	m.log.Info().Str("http", m.httpLn.Addr().String()).Str("callback", m.cfg.CallbackPath).
		Str("redis", m.redisKind()).Stringer("window", m.cfg.Window).Bool("dry_run", isDryRun(communities)).
		Msg("vkcounter serving")
	return nil
}

func (m *Main) openRedis(ctx context.Context) error {
	switch {
	case m.cfg.RedisCluster != "":
		m.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(m.cfg.RedisCluster, ",")})
	case m.cfg.RedisURL != "":
		opt, err := redis.ParseURL(m.cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		m.rdb = redis.NewClient(opt)
	default:
		m.mini = miniredis.NewMiniRedis()
		m.mini.ClockTTL(true) // without it keys never expire in miniredis
		if err := m.mini.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("start the embedded Redis: %w", err)
		}
		m.rdb = redis.NewClient(&redis.Options{Addr: m.mini.Addr()})
		m.log.Warn().Msg("no REDIS_URL: using an embedded in-memory Redis; counts live only as long as this process")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.rdb.Ping(pingCtx).Err(); err != nil {
		return fmt.Errorf("redis (%s): %w", m.redisKind(), err)
	}
	return nil
}

func (m *Main) redisKind() string {
	switch {
	case m.cfg.RedisCluster != "":
		return "cluster"
	case m.cfg.RedisURL != "":
		return "server"
	}
	return "embedded"
}

func isDryRun(cs []Community) bool {
	for _, c := range cs {
		if len(c.Tokens()) > 0 {
			return false
		}
	}
	return true
}

func (m *Main) newBot(communities []Community) (*bot.Bot, error) {
	groups := make([]bot.Group, 0, len(communities))
	for _, c := range communities {
		g := bot.Group{ID: c.GroupID}
		for _, t := range c.Tokens() {
			g.Senders = append(g.Senders, bot.NewVKSender(t, bot.VKOptions{MethodURL: m.cfg.VKAPIURL, Timeout: m.cfg.VKTimeout, OnCall: m.metrics.VKCall}))
		}
		if len(g.Senders) == 0 {
			g.Senders = []bot.Sender{bot.DryRun(m.log)}
		}
		groups = append(groups, g)
	}
	return bot.New(m.metrics.Counter(m.store), groups, bot.Options{
		Normalize:    m.cfg.Normalize,
		QueueSize:    m.cfg.ReplyQueue,
		RatePerToken: m.cfg.VKRate,
		OnReplyDone:  m.metrics.ReplyDone,
		Logger:       m.log,
	})
}

func (m *Main) routes(communities []Community) (http.Handler, error) {
	groups := make([]callback.Group, 0, len(communities))
	for _, c := range communities {
		groups = append(groups, callback.Group{ID: c.GroupID, Secret: c.Secret, Confirmation: c.Confirmation})
	}
	cb, err := callback.NewHandler(m.bot, callback.Options{Groups: groups, MaxBodyBytes: m.cfg.MaxBodyBytes, Logger: m.log})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(m.cfg.CallbackPath, m.metrics.Webhook(cb))
	mux.Handle("GET /metrics", m.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", m.readyz)
	mux.HandleFunc("GET /stats", m.stats)
	return mux, nil
}

// ready returns why the service cannot take traffic, or nil.
func (m *Main) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := m.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := m.bot.Ready(); err != nil {
		return fmt.Errorf("vk: %w", err)
	}
	return nil
}

func (m *Main) readyz(w http.ResponseWriter, r *http.Request) {
	if err := m.ready(r.Context()); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (m *Main) stats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"window_seconds": int64(m.cfg.Window / time.Second),
		"redis":          m.redisKind(),
		"bot":            m.bot.Stats(),
	})
}

// HTTPAddr is the address the HTTP server listens on.
func (m *Main) HTTPAddr() string { return m.httpLn.Addr().String() }

// Close shuts down within SHUTDOWN_TIMEOUT: stop accepting webhooks, finish
// in-flight requests, drain the reply queue, then close Redis.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if m.httpSrv != nil {
		if err := m.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	} else if m.httpLn != nil {
		m.httpLn.Close()
	}
	m.wg.Wait()
	if m.bot != nil {
		if err := m.bot.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if m.rdb != nil {
		m.rdb.Close()
	}
	if m.mini != nil {
		m.mini.Close()
	}
	return errors.Join(errs...)
}
