// Package metrics exposes vkcounter's Prometheus metrics. A Metrics owns its
// own registry (nothing is registered globally); its methods are the hooks
// the other packages accept: an HTTP middleware for the webhook, a timing
// wrapper for the counting script, and callbacks for the bot's VK calls and
// replies and the counter server's requests and connections.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/version"
)

const namespace = "vkcounter"

// latencyBuckets span 100µs to about 93s (×2.5 each): a webhook answers in
// milliseconds, while a VK call or a reply's age under retries and rate
// limits runs to tens of seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 16)

// Known label values, created at start so that every series exists (at 0)
// from the first scrape and rate() works from there.
var (
	replyResults = []bot.Class{bot.Delivered, bot.Drop, bot.Logged}
	vkMethods    = []string{"messages.send", "execute"}
	// countersRoutes are the routes of the /counters/ HTTP API (the
	// patterns of counters.HTTPHandler) with their methods.
	countersRoutes = [][2]string{
		{"GET", "/counters/access/{name}"}, {"POST", "/counters/access/{name}"}, {"GET", "/counters/access"},
		{"GET", "/counters/participants/{name}"},
		{"POST", "/counters/participants/{name}/visit"}, {"POST", "/counters/participants/{name}/leave"},
		{"GET", "/counters/windows/{name}"}, {"POST", "/counters/windows/{name}"},
		{"GET", "/counters/uniques/{name}"}, {"POST", "/counters/uniques/{name}"}, {"GET", "/counters/uniques"},
	}
)

// Metrics holds every collector. Its methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	webhookRequests *prometheus.CounterVec
	webhookDuration prometheus.Histogram
	scriptDuration  prometheus.Histogram
	scriptErrors    prometheus.Counter
	replies         *prometheus.CounterVec
	replyAge        prometheus.Histogram
	vkCalls         *prometheus.CounterVec
	vkDuration      *prometheus.HistogramVec
	counterRequests *prometheus.CounterVec
	counterConns    prometheus.Gauge
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
}

// New returns a Metrics with Go runtime and process collectors and every
// vkcounter series registered.
func New() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.registry.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.webhookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_requests_total",
		Help: "Webhook requests by outcome (ok, bad_request, forbidden, method_not_allowed, too_large, unavailable, other)."}, []string{"outcome"})
	m.webhookDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "webhook_duration_seconds",
		Help: "Time to answer a webhook request.", Buckets: latencyBuckets})
	m.scriptDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "script_duration_seconds",
		Help: "Round trip of the counting script.", Buckets: latencyBuckets})
	m.scriptErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "script_errors_total",
		Help: "Counting script calls that failed (the webhook answered 503)."})
	m.replies = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "replies_total",
		Help: "Replies that left the outbox, by result (delivered, drop, dry_run: logged instead of sent)."}, []string{"result"})
	m.replyAge = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "reply_age_seconds",
		Help: "Time from storing a reply in the outbox to VK accepting (or refusing) it.", Buckets: latencyBuckets})
	m.vkCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "vk_api_calls_total",
		Help: `VK API calls by method and error code ("0" success, "transport" no VK answer).`}, []string{"method", "code"})
	m.vkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "vk_api_duration_seconds",
		Help: "Duration of VK API calls.", Buckets: latencyBuckets}, []string{"method"})
	m.counterRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "counterport_requests_total",
		Help: "Counter protocol requests by opcode and status (snake_case, e.g. ok, not_found)."}, []string{"opcode", "status"})
	m.counterConns = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "counterport_connections",
		Help: "Open counter protocol connections."})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "counters_http_requests_total",
		Help: "Requests to the /counters/ HTTP API by method, route (the pattern matched) and HTTP status code."}, []string{"method", "route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "counters_http_duration_seconds",
		Help: "Time to answer a /counters/ HTTP API request, by route.", Buckets: latencyBuckets}, []string{"route"})
	v := version.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels say which build is running."}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	for _, c := range []prometheus.Collector{m.webhookRequests, m.webhookDuration, m.scriptDuration, m.scriptErrors,
		m.replies, m.replyAge, m.vkCalls, m.vkDuration, m.counterRequests, m.counterConns, m.httpRequests, m.httpDuration, build} {
		f(c)
	}
	m.initLabels()
	return m
}

// initLabels creates every known series at 0.
func (m *Metrics) initLabels() {
	for _, o := range callback.Outcomes() {
		m.webhookRequests.WithLabelValues(o)
	}
	for _, c := range replyResults {
		m.replies.WithLabelValues(c.String())
	}
	for _, method := range vkMethods {
		m.vkCalls.WithLabelValues(method, "0")
		m.vkDuration.WithLabelValues(method)
	}
	for _, op := range wire.Opcodes() {
		m.counterRequests.WithLabelValues(op.String(), wire.StatusOK.Label())
	}
	for _, r := range countersRoutes {
		m.httpRequests.WithLabelValues(r[0], r[1], "200")
		m.httpDuration.WithLabelValues(r[1])
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// GaugeFunc registers a gauge whose value is read from f at each scrape,
// e.g. the outbox length.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, f))
}

// CounterFunc registers a counter whose value is read from f at each scrape.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, f))
}

// CountersHTTP wraps the /counters/ HTTP API (its token check included),
// counting requests by method, matched route and status code, and timing
// them. The route is the pattern the API's mux matched (http.Request's
// Pattern, set on the request as it passes through), so names never become
// label values.
func (m *Metrics) CountersHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		m.httpDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		method := r.Method
		if method != http.MethodGet && method != http.MethodPost {
			method = "other" // any string may arrive here: keep the label set bounded
		}
		m.httpRequests.WithLabelValues(method, route, strconv.Itoa(sw.status)).Inc()
	})
}

// Webhook wraps the webhook handler, counting requests by outcome and
// timing them.
func (m *Metrics) Webhook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.webhookDuration.Observe(time.Since(start).Seconds())
		m.webhookRequests.WithLabelValues(callback.Outcome(sw.status)).Inc()
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Counter wraps c, timing every script call.
func (m *Metrics) Counter(c bot.Counter) bot.Counter {
	return timedCounter{c: c, m: m}
}

type timedCounter struct {
	c bot.Counter
	m *Metrics
}

func (t timedCounter) Count(ctx context.Context, identity, dedupe string) (previous int64, duplicate bool, err error) {
	start := time.Now()
	previous, duplicate, err = t.c.Count(ctx, identity, dedupe)
	t.m.scriptCall(start, err)
	return previous, duplicate, err
}

// Recorder wraps r, timing every script call as Counter does.
func (m *Metrics) Recorder(r bot.Recorder) bot.Recorder {
	return timedRecorder{r: r, m: m}
}

type timedRecorder struct {
	r bot.Recorder
	m *Metrics
}

func (t timedRecorder) Record(ctx context.Context, identity, dedupe string, r bot.Reply) (previous int64, duplicate bool, err error) {
	start := time.Now()
	previous, duplicate, err = t.r.Record(ctx, identity, dedupe, r)
	t.m.scriptCall(start, err)
	return previous, duplicate, err
}

// scriptCall records one count script call that began at start.
func (m *Metrics) scriptCall(start time.Time, err error) {
	m.scriptDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		m.scriptErrors.Inc()
	}
}

// VKCall records one VK API call; it fits bot.VKOptions.OnCall.
func (m *Metrics) VKCall(method, result string, took time.Duration) {
	m.vkCalls.WithLabelValues(method, result).Inc()
	m.vkDuration.WithLabelValues(method).Observe(took.Seconds())
}

// ReplyDone records a reply leaving the outbox; it fits bot.Options.OnReplyDone.
func (m *Metrics) ReplyDone(class bot.Class, age time.Duration) {
	m.replies.WithLabelValues(class.String()).Inc()
	m.replyAge.Observe(age.Seconds())
}

// OnRequest records one counter protocol request (counters.Observer).
func (m *Metrics) OnRequest(op wire.Opcode, st wire.Status) {
	m.counterRequests.WithLabelValues(op.String(), st.Label()).Inc()
}

// OnConn records a counter connection opening (+1) or closing (-1)
// (counters.Observer).
func (m *Metrics) OnConn(delta int) {
	m.counterConns.Add(float64(delta))
}
