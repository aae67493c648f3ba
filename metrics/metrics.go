// Package metrics exposes vkcounter's Prometheus metrics: it is the one
// place their names, help and labels are written. A Metrics owns its own
// registry (nothing is registered globally); its methods are the hooks the
// other packages accept, which know nothing of Prometheus: an HTTP
// middleware for the webhook and the counters API, a timing wrapper for the
// counting script, callbacks for the bot's VK calls and replies and the
// counter server's requests and connections, and readers of the outbox's
// and the long-poll pollers' totals.
package metrics

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/redisconn"
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
	replyResults = []bot.Class{bot.Delivered, bot.Drop, bot.FloodDropped, bot.Unknown, bot.Logged}
	vkMethods    = []string{"messages.send", "execute", "groups.getTokenPermissions"}
	scriptCauses = []string{causeOutboxFull, causeRedis, causeRedisRefused}
	// refusals are the counter port's statuses an alert reads, besides ok:
	// a cap reached (0x82) and a store that failed (0x86).
	refusals = []wire.Status{wire.StatusOutOfMemory, wire.StatusStoreFailure}
	// httpCodes are the /counters/ API's codes the dashboard and alerts
	// read: success, a cap reached, a store that failed.
	httpCodes = []string{"200", "507", "503"}
)

// The causes of vkcounter_script_errors_total.
const (
	causeOutboxFull = "outbox_full"
	causeRedis      = "redis"
	// causeRedisRefused: Redis answered but refused the write (out of
	// memory, request quota, read-only: redisconn.WriteRefusals), which
	// is no Redis unreachable.
	causeRedisRefused = "redis_refused"
)

// Metrics holds every collector. Its methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	webhookRequests *prometheus.CounterVec
	webhookDuration prometheus.Histogram
	scriptDuration  prometheus.Histogram
	scriptErrors    *prometheus.CounterVec
	replies         *prometheus.CounterVec
	replyAge        prometheus.Histogram
	vkCalls         *prometheus.CounterVec
	vkDuration      *prometheus.HistogramVec
	counterRequests *prometheus.CounterVec
	counterConns    prometheus.Gauge
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec

	// counterOK holds counterRequests' series with status ok, by known
	// opcode, looked up once: nearly every request takes this path.
	counterOK [256]prometheus.Counter
	// webhookOK is webhookRequests' series "ok", and replyDone replies'
	// series by result, looked up once: a label lookup hashes its values
	// and takes the vector's lock, on every message.
	webhookOK prometheus.Counter
	replyDone map[bot.Class]prometheus.Counter

	writes *redisconn.WriteWatch // nil until ObserveRedisWrites
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
		Help: "Time to count a message and store its reply: one script call (two calls on a Redis Cluster).", Buckets: latencyBuckets})
	m.scriptErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "script_errors_total",
		Help: "Counting script calls that failed (the webhook answered 503), by cause: outbox_full (the community's outbox holds OUTBOX_MAX_LEN replies) or redis (Redis failed, refused or was slower than the webhook's deadline)."}, []string{"cause"})
	m.replies = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "replies_total",
		Help: "Replies that left the outbox, by result (delivered, drop, flood_dropped: dropped as the oldest of a peer under flood control past the replies kept, unknown_error: dropped after VK kept answering an error code the bot does not know, dry_run: logged instead of sent)."}, []string{"result"})
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
	m.webhookOK = m.webhookRequests.WithLabelValues(callback.Outcome(http.StatusOK))
	m.replyDone = make(map[bot.Class]prometheus.Counter, len(replyResults))
	for _, c := range replyResults {
		m.replyDone[c] = m.replies.WithLabelValues(c.String())
	}
	for _, c := range scriptCauses {
		m.scriptErrors.WithLabelValues(c)
	}
	for _, method := range vkMethods {
		for _, result := range bot.CallResults() {
			m.vkCalls.WithLabelValues(method, result)
		}
		m.vkDuration.WithLabelValues(method)
	}
	for _, op := range wire.Opcodes() {
		m.counterOK[op] = m.counterRequests.WithLabelValues(op.String(), wire.StatusOK.Label())
		for _, st := range refusals {
			m.counterRequests.WithLabelValues(op.String(), st.Label())
		}
	}
	for _, r := range httpapi.Routes() {
		for _, code := range httpCodes {
			m.httpRequests.WithLabelValues(r.Method, r.Pattern, code)
		}
		m.httpDuration.WithLabelValues(r.Pattern)
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// gaugeFunc registers a gauge whose value is read from f at each scrape,
// e.g. the outbox length.
func (m *Metrics) gaugeFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, f))
}

// counterFunc registers a counter whose value is read from f at each scrape.
func (m *Metrics) counterFunc(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, f))
}

// ObserveOutbox registers the outbox gauges and the VK failure gauge,
// read at each scrape: total is the outbox's reading over the communities
// served, redeliveries the replies taken over from a stalled sender
// (outbox.Outbox.Redeliveries), vkFailures the VK calls in a row that got
// no answer (bot.Bot.ConsecutiveVKFailures). Call it once.
func (m *Metrics) ObserveOutbox(total func() outbox.Stats, redeliveries, vkFailures func() int64) {
	read := func(f func(outbox.Stats) float64) func() float64 {
		return func() float64 { return f(total()) }
	}
	m.gaugeFunc("outbox_length", "Entries in the outbox, as last read (see outbox_reading_age_seconds): replies not yet accepted by VK (set aside for a retry included), and those finished while an older one still waits.",
		read(func(s outbox.Stats) float64 { return float64(s.Length) }))
	m.gaugeFunc("outbox_oldest_seconds", "Age of the oldest reply in the outbox, as last read.",
		read(func(s outbox.Stats) float64 { return s.Oldest.Seconds() }))
	m.gaugeFunc("outbox_reading_age_seconds", "How long ago the outbox gauges were read from Redis (-1: never); it grows while Redis is unreachable, or while the outbox stays empty and idle.",
		read(func(s outbox.Stats) float64 {
			if s.Age < 0 {
				return -1
			}
			return s.Age.Seconds()
		}))
	m.counterFunc("outbox_redeliveries_total", "Replies this instance took over from a sender that held them too long.",
		func() float64 { return float64(redeliveries()) })
	m.gaugeFunc("vk_consecutive_failures", "VK API calls in a row that got no answer (0 while VK answers).",
		func() float64 { return float64(vkFailures()) })
}

// ObserveHeadroom registers the counters' Redis guard's readers, read at
// each scrape: refused is the new counter names refused so far
// (headroom.Guard.Refusals), full whether the last reading was past the
// limit. Call it once.
func (m *Metrics) ObserveHeadroom(refused func() uint64, full, unknown func() bool) {
	m.gaugeFunc("counters_redis_headroom_unknown", "1 while the headroom guard of the counters' Redis cannot read used_memory (INFO refused to the service's user: new counter names are not checked; or refused inside scripts: checked on the guard's own reading only), else 0.",
		func() float64 { return boolValue(unknown()) })
	m.counterFunc("counters_redis_new_names_refused_total", "New counter names refused because the counters' Redis is past maxmemory less COUNTERS_REDIS_HEADROOM.",
		func() float64 { return float64(refused()) })
	m.gaugeFunc("counters_redis_full", "1 while the last reading of the counters' Redis was past maxmemory less COUNTERS_REDIS_HEADROOM (new counter names refused), else 0.",
		func() float64 {
			if full() {
				return 1
			}
			return 0
		})
}

// ObserveRedisRefusals registers the Redis calls refused by cause, read
// at each scrape: refused(cause) for each of causes (redisconn.Refusals
// and redisconn.Causes). Call it once.
func (m *Metrics) ObserveRedisRefusals(causes []string, refused func(cause string) uint64) {
	for _, cause := range causes {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "redis_refused_total",
			Help:        "Redis calls refused or not answered, by cause (conn, timeout, moved, clusterdown, tryagain, readonly, masterdown, loading, oom, quota, busy); each reloads a cluster's slot map but oom, quota and busy.",
			ConstLabels: prometheus.Labels{"cause": cause}}, func() float64 { return float64(refused(cause)) }))
	}
}

// ObserveWebhookRejections registers the webhook's refused requests by
// reason, read at each scrape from rejected (callback.Handler.Rejected);
// one series per reason, from the first scrape. Call it once.
func (m *Metrics) ObserveWebhookRejections(rejected func(callback.Reason) int64) {
	for _, r := range callback.Reasons() {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_rejected_total",
			Help:        "Webhook requests refused, by reason: wrong_secret (a served community without its secret: VK_SECRET differs from the community's Callback API settings), unknown_community, no_confirmation, malformed, too_large, wrong_method.",
			ConstLabels: prometheus.Labels{"reason": r.String()}}, func() float64 { return float64(rejected(r)) }))
	}
}

// ObserveGrowthRefusals registers the readers of the writes refused
// because they would grow a counter name that exists, read at each scrape:
// headroom those refused past COUNTERS_REDIS_HEADROOM
// (headroom.Guard.GrowthRefusals), keyCap the participant visits refused
// by COUNTERS_PARTICIPANT_MAX_KEYS (participant.KeyCap.Refusals); one
// series per reason, from the first scrape. Call it once.
func (m *Metrics) ObserveGrowthRefusals(headroom, keyCap func() uint64) {
	for reason, f := range map[string]func() uint64{"headroom": headroom, "key_cap": keyCap} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "counters_growth_refused_total",
			Help:        "Writes refused because they would grow a counter name that exists (a new participant key, window second or unique register), by reason: headroom (the counters' Redis past maxmemory less COUNTERS_REDIS_HEADROOM) or key_cap (COUNTERS_PARTICIPANT_MAX_KEYS).",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(f()) }))
	}
}

// ObserveResourceBirth registers the readers of the resource store's
// birth rule (RESOURCE_STORE=redis), read at each scrape: until, when
// acquires are granted again and whether they are refused now
// (resource.Redis.RefusedUntil), and refusals, the acquires it refused
// (resource.Redis.YoungRefusals). Call it once.
func (m *Metrics) ObserveResourceBirth(until func() (time.Time, bool), refusals func() uint64) {
	m.gaugeFunc("resource_acquires_refused_until_timestamp_seconds", "Unix time until which resource acquires are refused because the store's data in Redis is younger than RESOURCE_LEASE (a first start, or Redis lost its data); 0 while they are not refused.",
		func() float64 {
			if t, ok := until(); ok {
				return float64(t.UnixMilli()) / 1000
			}
			return 0
		})
	m.counterFunc("resource_young_refusals_total", "Resource acquires refused because the store's data in Redis was younger than RESOURCE_LEASE.",
		func() float64 { return float64(refusals()) })
}

// ObservePollers registers the long-poll pollers' totals, summed over the
// communities and read at each scrape from total (longpoll.Group.Total).
// Call it once.
func (m *Metrics) ObservePollers(total func() (sum longpoll.Stats, polling int)) {
	sum := func(f func(longpoll.Stats, int) int64) func() float64 {
		return func() float64 { return float64(f(total())) }
	}
	m.counterFunc("longpoll_events_total", "Events received from the Bots Long Poll API, received again after a retry included.",
		sum(func(s longpoll.Stats, _ int) int64 { return s.Events }))
	m.counterFunc("longpoll_messages_total", "Messages from the Bots Long Poll API handled (counted, reply stored).",
		sum(func(s longpoll.Stats, _ int) int64 { return s.Messages }))
	m.counterFunc("longpoll_skipped_total", "Malformed or foreign Bots Long Poll events skipped.",
		sum(func(s longpoll.Stats, _ int) int64 { return s.Skipped }))
	m.counterFunc("longpoll_retries_total", "Failed Bots Long Poll requests and messages, retried with the same ts.",
		sum(func(s longpoll.Stats, _ int) int64 { return s.Retries }))
	m.counterFunc("longpoll_failed_total", "Bots Long Poll answers with failed 1, 2 or 3.",
		sum(func(s longpoll.Stats, _ int) int64 { return s.Failed1 + s.Failed2 + s.Failed3 }))
	m.gaugeFunc("longpoll_polling", "Communities this instance polls (holds the lease of).",
		sum(func(_ longpoll.Stats, polling int) int64 { return int64(polling) }))
}

// Readiness is the service's state as /readyz and the readiness metrics
// tell it.
type Readiness struct {
	// NotReady is why the service cannot take traffic (/readyz's 503), or
	// nil.
	NotReady error
	// RedisDown is set when the bot's Redis did not answer a PING.
	RedisDown bool
	// Tokens is the state of every community token (bot.Bot.Tokens).
	Tokens []tokens.Status
}

// ObserveReadiness registers vkcounter_ready, vkcounter_redis_up and
// vkcounter_vk_token_state, read from read at each scrape (read may ask
// Redis, and bounds how often: it is called once per scrape). Call it
// once.
func (m *Metrics) ObserveReadiness(read func() Readiness) {
	m.registry.MustRegister(readinessCollector(read))
}

var (
	readyDesc = prometheus.NewDesc(namespace+"_ready", "1 while /readyz answers 200 (Redis answers, VK accepts the tokens), else 0.", nil, nil)
	redisDesc = prometheus.NewDesc(namespace+"_redis_up",
		"1 while the bot's Redis answers, else 0: a call of the service's own answered in the last 150 s with none failed since, or else a PING within a second (read at most every 30 s while the service is ready, at each scrape while it is not); a full outbox is not Redis being down.", nil, nil)
	tokenDesc = prometheus.NewDesc(namespace+"_vk_token_state",
		"1 for the state each community token is in (ok, retrying: VK gave no definite answer yet, halted: the sender paused it after VK refused a send, refused: VK refuses it or it lacks the messages right), 0 for the others; token is its position in the community's list, from 0.",
		[]string{"group", "token", "state"}, nil)
)

// readinessCollector is ObserveReadiness's collector: one read per
// scrape gives all three metrics.
type readinessCollector func() Readiness

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- redisDesc
	ch <- tokenDesc
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	r := c()
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, boolValue(r.NotReady == nil))
	ch <- prometheus.MustNewConstMetric(redisDesc, prometheus.GaugeValue, boolValue(!r.RedisDown))
	for _, t := range r.Tokens {
		group, token := strconv.Itoa(t.Group), strconv.Itoa(t.Index)
		for _, s := range tokens.States() {
			ch <- prometheus.MustNewConstMetric(tokenDesc, prometheus.GaugeValue, boolValue(t.State == s), group, token, s.String())
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
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
		if sw.status == http.StatusOK {
			m.webhookOK.Inc()
			return
		}
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

// Unwrap gives http.ResponseController the writer underneath, so that a
// handler can still set its connection's deadlines: the webhook's body
// deadline (callback.Options.BodyTimeout) does; without it the deadline
// was silently not set and a slow body held its connection for the
// server's whole ReadTimeout.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Recorder wraps r, timing every record of a message (one script call on
// a single Redis server, the count and the store's two on a cluster).
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

// scriptCall records one record of a message that began at start.
func (m *Metrics) scriptCall(start time.Time, err error) {
	m.scriptDuration.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
	case errors.Is(err, outbox.ErrFull):
		m.scriptErrors.WithLabelValues(causeOutboxFull).Inc()
	case m.writes != nil && m.writes.Observe(err) != "":
		m.scriptErrors.WithLabelValues(causeRedisRefused).Inc()
	default:
		m.scriptErrors.WithLabelValues(causeRedis).Inc()
	}
}

// ObserveRedisEviction registers vkcounter_redis_eviction_policy, 1 with
// the maxmemory-policy of the bot's Redis read at start (the first evicting
// one of a cluster's masters; "unknown" where it could not be read), and
// vkcounter_redis_evicted_keys, read from evicted at each scrape. Call it
// once.
func (m *Metrics) ObserveRedisEviction(policy string, evicted func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "redis_eviction_policy",
		Help:        "1, with the maxmemory-policy of the bot's Redis read at start (CONFIG GET or INFO memory; unknown where both are refused): any but noeviction may evict queued replies and dedupe keys.",
		ConstLabels: prometheus.Labels{"policy": policy}}, func() float64 { return 1 }))
	m.gaugeFunc("redis_evicted_keys", "Keys the bot's Redis evicted since the service started, at the last /readyz (read only under an evicting policy): above 0, /readyz answers 503.", evicted)
}

// ObserveRedisWrites makes the counting script's errors go to w as well
// (redisconn.WriteWatch: the ones where Redis answered but refused the
// write), and registers its readers, read at each scrape: the refusals so
// far, and refusing, the cause (of redisconn.WriteRefusals) for which the
// bot's Redis refuses writes now, or "" (the readiness check's finding).
// Call it once, before the bot counts.
func (m *Metrics) ObserveRedisWrites(w *redisconn.WriteWatch, refusing func() string) {
	m.writes = w
	m.counterFunc("script_oom_errors_total", "Counting script calls Redis refused because it was full (OOM, or a managed service's capacity error; also in script_errors_total).",
		func() float64 { return float64(w.Total(redisconn.CauseOOM)) })
	m.gaugeFunc("redis_oom", "1 while the bot's Redis refuses writes for lack of memory (the counting script failed with OOM lately, or used_memory is past maxmemory: /readyz answers 503), else 0.",
		func() float64 { return boolValue(refusing() == redisconn.CauseOOM) })
	for _, cause := range slices.Sorted(maps.Keys(redisconn.WriteRefusals)) {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "redis_refusing_writes",
			Help:        "1 while the bot's Redis answers but refuses writes for this cause (oom: out of memory or capacity, quota: the plan's request quota spent, readonly: a read-only replica; /readyz answers 503 naming it), else 0.",
			ConstLabels: prometheus.Labels{"cause": cause}}, func() float64 { return boolValue(refusing() == cause) }))
	}
}

// VKCall records one VK API call; it fits bot.VKOptions.OnCall.
func (m *Metrics) VKCall(method, result string, took time.Duration) {
	m.vkCalls.WithLabelValues(method, result).Inc()
	m.vkDuration.WithLabelValues(method).Observe(took.Seconds())
}

// ReplyDone records a reply leaving the outbox; it fits bot.Options.OnReplyDone.
func (m *Metrics) ReplyDone(class bot.Class, age time.Duration) {
	if c := m.replyDone[class]; c != nil {
		c.Inc()
	} else {
		m.replies.WithLabelValues(class.String()).Inc()
	}
	m.replyAge.Observe(age.Seconds())
}

// OnRequest records one counter protocol request (counters.Observer).
func (m *Metrics) OnRequest(op wire.Opcode, st wire.Status) {
	if c := m.counterOK[op]; c != nil && st == wire.StatusOK {
		c.Inc()
		return
	}
	m.counterRequests.WithLabelValues(op.String(), st.Label()).Inc()
}

// OnConn records a counter connection opening (+1) or closing (-1)
// (counters.Observer).
func (m *Metrics) OnConn(delta int) {
	m.counterConns.Add(float64(delta))
}
