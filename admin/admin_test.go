package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/admin/admintest"
	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/redact"
	"github.com/vkcounter/vkcounter/internal/toptexts"
	"github.com/vkcounter/vkcounter/metrics"
)

// source is a fixed Snapshot, its Stats for /stats.
type source struct{ snap Snapshot }

func (s *source) Stats() Stats       { return s.snap.Stats }
func (s *source) Snapshot() Snapshot { return s.snap }

// counter is a Counter over a map of text keys; it fails with err, and
// holds each look-up until release is closed when release is set. calls
// counts its SeenMany calls (round trips), asked the keys asked.
type counter struct {
	mu      sync.Mutex
	counts  map[string]int64
	err     error
	calls   int
	asked   []string
	release chan struct{}
	started chan struct{}
}

func (c *counter) Window() time.Duration { return 24 * time.Hour }
func (c *counter) SeenMany(ctx context.Context, identities []string) ([]int64, error) {
	if c.release != nil {
		c.started <- struct{}{}
		<-c.release
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("look-up without a deadline")
	}
	c.calls++
	c.asked = append(c.asked, identities...)
	out := make([]int64, len(identities))
	for i, id := range identities {
		out[i] = c.counts[id]
	}
	return out, c.err
}

const group = 7

// sample is a Snapshot of a service that counted and sent, with a token
// refused, a drop, counter traffic and every section set.
func sample() Snapshot {
	now := time.Now()
	return Snapshot{
		Stats: Stats{
			Service:       ServiceSection{Version: "v1.2.3", Revision: "abc", UptimeSeconds: age.Seconds(90 * time.Second), Mode: "callback"},
			WindowSeconds: 86400,
			Redis:         "standalone",
			Webhook:       WebhookSection{Rejected: map[string]int64{"wrong_secret": 0, "unknown_community": 2, "no_confirmation": 0, "malformed": 1, "too_large": 0, "wrong_method": 0}},
			Bot:           bot.Stats{Received: 5, Duplicates: 1, Sent: 3, Dropped: 1, Retried: 2, Late: 1, Ignored: 4},
			LastDrops:     []bot.DroppedReply{{At: now, GroupID: group, PeerID: 1000, Error: "VK error 901: can't send"}},
			Outbox:        outbox.Report{Length: 2, OldestSeconds: 3, Age: age.Seconds(time.Second), Redeliveries: 1},
			Counters:      CountersSection{Store: "redis"},
			CounterPort: metrics.Traffic{Connections: 1, Requests: map[string]int64{"hit": 3, "get": 1}, Failed: map[string]int64{"not_found": 1},
				HTTP: map[string]int64{"/counters/access/{name}": 1}, HTTPFailed: map[string]int64{}},
			RedisMemory: &MemorySection{Node: "127.0.0.1:6379", UsedBytes: 10 << 20, MaxBytes: 100 << 20, LimitBytes: 80 << 20, Refused: 4},
			VK: VKSection{ConsecutiveFailures: 0, Tokens: []tokens.Status{
				{Group: group, Index: 0, State: tokens.OK, Checks: 2, CheckedAt: now},
				{Group: group, Index: 1, State: tokens.Refused, Err: errors.New("VK error 5: invalid access_token"), Checks: 1}}},
			Longpoll: map[string]longpoll.Stats{"7": {Polling: true, Messages: 9}},
		},
		RedisWhere:  "127.0.0.1:6379",
		CounterAddr: "127.0.0.1:11211",
		Window:      "24h",
		Webhook:     true,
		Communities: []Community{{GroupID: group, Tokens: 2}},
		Settings:    []Setting{{Name: "VK_TOKEN", Value: "set"}, {Name: "WINDOW", Value: "24h"}},
	}
}

// surface is the admin surface of snap and c, with readiness r (nil:
// ready) and the redactor of secrets.
func surface(t testing.TB, snap Snapshot, c *counter, r *Readiness, secrets ...string) *Admin {
	t.Helper()
	if c == nil {
		c = &counter{}
	}
	if r == nil {
		r = &Readiness{}
	}
	a, err := New(Options{Source: &source{snap}, Readiness: r, History: NewHistory(),
		Texts:   TextsOptions{Counter: c, Groups: []int{group}, Timeout: time.Second},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "# metrics") }), Redactor: redact.New(secrets...)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// get serves GET path from a's handler.
func get(a *Admin, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// flatStats is /stats flattened: "bot.received" → "5".
func flatStats(t testing.TB, body []byte) map[string]string {
	t.Helper()
	flat, err := admintest.Flat(body)
	if err != nil {
		t.Fatalf("/stats: %v", err)
	}
	return flat
}

// TestPageMatchesStats: every figure the page tags is /stats' figure of
// the same path, for one snapshot; the page shows every section.
func TestPageMatchesStats(t *testing.T) {
	a := surface(t, sample(), nil, nil)
	page, stats := get(a, "/"), get(a, "/stats")
	if page.Code != 200 || stats.Code != 200 || stats.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("page %d, /stats %d %q", page.Code, stats.Code, stats.Header().Get("Content-Type"))
	}
	flat := flatStats(t, stats.Body.Bytes())
	for _, e := range admintest.Disagree(page.Body.String(), flat, "bot.received", "bot.duplicates", "bot.sent", "bot.dropped", "bot.late", "bot.ignored",
		"outbox.length", "counter_port.connections", "counter_port.requests.hit", "counter_port.failed.not_found",
		"counter_port.http_requests./counters/access/{name}", "webhook.rejected.malformed", "redis_memory.new_names_refused",
		"vk.consecutive_failures", "ready", "service.version", "service.mode", "window_seconds", "redis") {
		t.Error(e)
	}
	body := page.Body.String()
	for _, want := range []string{"community 7, peer 1000: VK error 901", "<td>2 of 2</td><td><b>refused</b>", "VK error 5: invalid access_token",
		"community 7</td><td>polled here", "10.0 MiB / 100.0 MiB", "<code>VK_TOKEN</code></td><td><code>set</code>",
		`24h (<span data-stat="window_seconds">86400</span> s)`, "127.0.0.1:11211", "version <b data-stat=\"service.version\">v1.2.3</b> (abc)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestPageNotReady: the page and /readyz give every reason the
// readiness gives, the page says Redis does not answer, and neither
// makes the checks of a Redis that does not answer.
func TestPageNotReady(t *testing.T) {
	served := 0
	r := &Readiness{
		Redis:   func(context.Context) error { return errors.New("dial tcp: connection refused") },
		Server:  []func() error{func() error { served++; return errors.New("out of memory") }},
		VK:      func() error { return errors.New("cannot check the token of community 7 yet") },
		Refresh: func(context.Context) { served += 100 },
	}
	a := surface(t, sample(), nil, r)
	page := get(a, "/").Body.String()
	for _, want := range []string{"<title>NOT READY · vkcounter</title>", "<li>redis: dial tcp: connection refused</li>",
		"<li>vk: cannot check the token of community 7 yet</li>", `<span class="badge bad">no</span>`, "dial tcp: connection refused</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	w := get(a, "/readyz")
	lines := strings.Split(strings.TrimSpace(w.Body.String()), "\n")
	if w.Code != 503 || len(lines) != 2 || lines[0] != "not ready: redis: dial tcp: connection refused" || lines[1] != "vk: cannot check the token of community 7 yet" {
		t.Errorf("/readyz: %d %q", w.Code, w.Body.String())
	}
	if served != 100 {
		t.Errorf("with Redis down: Refresh and the server's checks made %d (want Refresh alone, by /readyz: 100)", served)
	}
}

// TestReadyzReasons: /readyz says ready with every check passing, and
// names each failing check by what it is about.
func TestReadyzReasons(t *testing.T) {
	var refreshed int
	ok := &Readiness{Redis: func(context.Context) error { return nil }, Refresh: func(ctx context.Context) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("Refresh without a deadline")
		}
		refreshed++
	}}
	if w := get(surface(t, sample(), nil, ok), "/readyz"); w.Code != 200 || w.Body.String() != "ready\n" || refreshed != 1 {
		t.Errorf("/readyz: %d %q, refreshed %d", w.Code, w.Body.String(), refreshed)
	}
	bad := &Readiness{
		Redis:  func(context.Context) error { return nil },
		Slots:  func(context.Context) error { return errors.New("slots 0-5460 unreachable") },
		Server: []func() error{func() error { return errors.New("refuses writes: OOM") }, func() error { return errors.New("evicted 3 keys") }},
	}
	reasons, redisErr := bad.Check(context.Background())
	if redisErr != nil || fmt.Sprint(reasons) != "[redis cluster: slots 0-5460 unreachable redis: refuses writes: OOM redis: evicted 3 keys]" {
		t.Errorf("Check: %v, %v", reasons, redisErr)
	}
	if w := get(surface(t, sample(), nil, bad), "/"); !strings.Contains(w.Body.String(), "<li>redis: evicted 3 keys</li>") ||
		!strings.Contains(w.Body.String(), `<span class="badge ok">yes</span>`) {
		t.Errorf("the page of a Redis that answers but evicts: %s", w.Body.String())
	}
}

// TestPageHoldsNoSecret: a secret in VK's answers, a reason or a
// drop's error is served as [secret] by the page, /stats and /readyz,
// and a VK-shaped token whatever the Redactor was given.
func TestPageHoldsNoSecret(t *testing.T) {
	const secret = "callback-secret-0123456789"
	snap := sample()
	snap.Stats.LastDrops[0].Error = "VK error 5: " + strings.ToUpper(secret)
	snap.Stats.VK.Tokens[1].Err = errors.New("invalid access_token (vk1.a.tokentokentoken)")
	r := &Readiness{VK: func() error { return errors.New("refused: " + secret) }}
	a := surface(t, snap, nil, r, secret)
	for _, path := range []string{"/", "/stats", "/readyz"} {
		body := get(a, path).Body.String()
		if strings.Contains(strings.ToLower(body), secret) || strings.Contains(body, "vk1.a.") || !strings.Contains(body, redact.Mark) {
			t.Errorf("%s holds a secret, or no mark: %s", path, body)
		}
	}
}

// TestPageShowsHiddenCharactersEscaped: a text, a reason and VK's error
// with a direction override (U+202E) and a control character are shown
// with them escaped, never as they are.
func TestPageShowsHiddenCharactersEscaped(t *testing.T) {
	snap := sample()
	top, err := toptexts.New(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	top.Observe(bot.TextKey(callback.Message{GroupID: group, Text: "abc\u202edef\x07"}, false), 1, time.Now())
	snap.Stats.TopTexts = TopTexts(top, time.Now())
	snap.Stats.LastDrops[0].Error = "drop \u202egnp.exe"
	r := &Readiness{VK: func() error { return errors.New("vk says \u2066x\u2069") }}
	page := get(surface(t, snap, nil, r), "/").Body.String()
	for _, want := range []string{`<q>abc\u202edef\u0007</q>`, `drop \u202egnp.exe`, `vk says \u2066x\u2069`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.ContainsAny(page, "\u202e\x07\u2066\u2069") {
		t.Errorf("the page holds the hidden characters as they are")
	}
}

// TestPageTopTexts: with TOP_TEXTS the page lists the texts with their
// counts (attachments as keys, communities shown when there are
// several); without, neither the page nor /stats shows the section.
func TestPageTopTexts(t *testing.T) {
	top, err := toptexts.New(5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	top.Observe(bot.TextKey(callback.Message{GroupID: group, Text: "hello"}, false), 40, now)
	top.Observe(bot.TextKey(callback.Message{GroupID: 8, Attachments: []callback.Attachment{{Type: "sticker", StickerID: 9012}}}, false), 3, now)
	snap := sample()
	snap.Communities = append(snap.Communities, Community{GroupID: 8})
	snap.Stats.TopTexts = TopTexts(top, now)
	a := surface(t, snap, nil, nil)
	page := get(a, "/").Body.String()
	for _, want := range []string{"Most repeated texts, as seen by this instance", `community 7 · </span><q>hello</q>`, `<td class="n">40</td>`,
		`community 8 · </span><span class="mute">no text, attachments</span> <code>sticker:9012</code>`, "The 5 texts (TOP_TEXTS)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	flat := flatStats(t, get(a, "/stats").Body.Bytes())
	if flat["top_texts.seen_by"] != "this instance" || flat["top_texts.max"] != "5" {
		t.Errorf("/stats top_texts: %v", flat)
	}
	if TopTexts(nil, now) != nil {
		t.Error("TopTexts of no table is not nil")
	}
	off := surface(t, sample(), nil, nil)
	if page := get(off, "/").Body.String(); strings.Contains(page, "Most repeated") {
		t.Error("without TOP_TEXTS the page shows top texts")
	}
	if body := get(off, "/stats").Body.String(); strings.Contains(body, "top_texts") {
		t.Error("without TOP_TEXTS /stats shows top_texts")
	}
}

// TestPageFollowsTheMode: a bot whose communities all have a token says
// nothing of dry-run; one without any says its replies are logged, not
// sent; one with some says which; long poll says the webhook is not
// served.
func TestPageFollowsTheMode(t *testing.T) {
	sends := sample()
	page := get(surface(t, sends, nil, nil), "/").Body.String()
	for _, s := range []string{"dry-run", "dry run", "logged"} {
		if strings.Contains(strings.ToLower(page), s) {
			t.Errorf("the page of a bot that sends says %q", s)
		}
	}
	if !strings.Contains(page, "Replies sent per minute") {
		t.Errorf("the page lacks the replies chart's title")
	}

	demo := sample()
	demo.Stats.Service.DryRun = true
	demo.Stats.VK.Tokens = nil
	demo.Communities = []Community{{GroupID: 1}}
	page = get(surface(t, demo, nil, nil), "/").Body.String()
	for _, s := range []string{"Replies logged per minute (dry-run: not sent)", "dry-run (replies are logged, not sent)",
		"<td>1</td><td>none</td><td><b>dry-run</b>", `data-stat="bot.dry_run"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the demo's page lacks %q", s)
		}
	}

	some := sample()
	some.Communities = append(some.Communities, Community{GroupID: 8})
	if page := get(surface(t, some, nil, nil), "/").Body.String(); !strings.Contains(page, "Replies sent per minute (logged, for the communities in dry-run)") {
		t.Errorf("the page of a bot with a community in dry-run lacks its replies title")
	}

	poll := sample()
	poll.Webhook = false
	poll.Stats.Service.Mode = "longpoll"
	if page := get(surface(t, poll, nil, nil), "/").Body.String(); !strings.Contains(page, "Not served: VK_MODE=longpoll") {
		t.Errorf("the long-poll page does not say the webhook is not served")
	}
}

// TestPageShowsRejections: a wrong secret is shown at the top with what
// it means, and each reason's refusals in the webhook's panel.
func TestPageShowsRejections(t *testing.T) {
	snap := sample()
	snap.Stats.Webhook.Rejected["wrong_secret"] = 10
	page := get(surface(t, snap, nil, nil), "/").Body.String()
	for _, s := range []string{"10 webhook requests refused for a wrong or missing secret", "VK_SECRET is not the secret key in the community's Callback API settings",
		`<span class="badge bad" data-stat="webhook.rejected.wrong_secret">10</span>`, "unknown community (a group_id not served)"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	for _, r := range callback.Reasons() {
		if !strings.Contains(page, `data-stat="webhook.rejected.`+r.String()+`"`) {
			t.Errorf("the page lacks the refusals for %s", r)
		}
	}
}

// TestPageTokens: each token is numbered, never shown; an ok token shows
// retrying while VK's calls go unanswered.
func TestPageTokens(t *testing.T) {
	snap := sample()
	snap.Stats.VK.ConsecutiveFailures = 3
	snap.Settings = append(snap.Settings, Setting{Name: "VK_TOKEN", Value: "set"})
	rows := tokenRows(snap.Communities, snap.Stats.VK)
	if len(rows) != 2 || rows[0].Token != "1 of 2" || rows[0].State != "retrying" || rows[0].Error != "3 calls in a row got no answer" ||
		rows[1].State != "refused" || rows[0].CheckedAt == "" || rows[1].CheckedAt != "" {
		t.Errorf("token rows: %+v", rows)
	}
}

// TestPageCharts: the charts hold what the history observed, per
// minute, with the y-axis scaled to the peak; a counter opcode shows its
// rate over the last whole minute.
func TestPageCharts(t *testing.T) {
	a := surface(t, sample(), nil, nil)
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC) // a minute's start
	a.history.Observe(t0, bot.Stats{}, metrics.Traffic{Requests: map[string]int64{"hit": 0}})
	a.history.Observe(t0.Add(time.Minute), bot.Stats{Received: 30}, metrics.Traffic{Requests: map[string]int64{"hit": 120}})
	snap := sample()
	snap.Stats.Bot = bot.Stats{Received: 34, Sent: 3}
	snap.Stats.CounterPort.Requests = map[string]int64{"hit": 150}
	var b strings.Builder
	if err := a.Render(&b, snap, t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"34 in the last hour · peak 30/min · 34 since start", "3 in the last hour",
		`<div class="yaxis" aria-hidden="true"><span>50</span><span>25</span><span>0</span></div>`,
		"<title>1 min ago: 30</title>", "<title>this minute: 4</title>", "(blank: before the start)",
		`<span data-stat="counter_port.requests.hit">150</span> · 2.0/s`, "2026-11-26 00:01:30 UTC"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestAxisScale(t *testing.T) {
	for max, want := range map[int64]int64{0: 2, 1: 2, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 40: 50, 51: 100, 100: 100, 101: 200, 4999: 5000} {
		if got := axisScale(max); got != want {
			t.Errorf("axisScale(%d) = %d, want %d", max, got, want)
		}
	}
}

func TestHumanUnits(t *testing.T) {
	for s, want := range map[float64]string{-1: "never", 1.25: "1.2 s", 61: "1 min 1 s", 3 * 3600: "3 h 0 min", 50 * 3600: "2 d 2 h"} {
		if got := humanSeconds(s); got != want {
			t.Errorf("humanSeconds(%v) = %q, want %q", s, got, want)
		}
	}
	if got := Bytes(1 << 20); got != "1.0 MiB" {
		t.Errorf("Bytes(1 MiB) = %q", got)
	}
}

// TestPageStaysStatic: the page keeps its Content-Security-Policy
// (nothing loaded, no script), is not cached, runs no script, refreshes
// itself and fits a phone's width (the screenshots' layouts).
func TestPageStaysStatic(t *testing.T) {
	w := get(surface(t, sample(), nil, nil), "/")
	if csp := w.Header().Get("Content-Security-Policy"); csp != "default-src 'none'; style-src 'unsafe-inline'; img-src data:" {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("headers %v", w.Header())
	}
	page := w.Body.String()
	for _, s := range []string{"<script", "javascript:", " onload=", " onclick=", "src=", "<link", "url(", "@import", "<iframe", "<object"} {
		if strings.Contains(strings.ToLower(page), s) {
			t.Errorf("the page holds %q: it must load nothing and run no script", s)
		}
	}
	for _, s := range []string{`<meta name="viewport" content="width=device-width, initial-scale=1">`, "grid-template-columns:repeat(auto-fit,minmax(320px,1fr))",
		`<meta http-equiv="refresh" content="5">`, "<svg"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lost %s (its refresh, its charts or its phone layout)", s)
		}
	}
}

// TestRoutes: only GET is served; /healthz and /metrics answer; an
// unknown path is 404.
func TestRoutes(t *testing.T) {
	a := surface(t, sample(), nil, nil)
	for path, want := range map[string]string{"/healthz": "ok\n", "/metrics": "# metrics\n"} {
		if w := get(a, path); w.Code != 200 || w.Body.String() != want {
			t.Errorf("%s: %d %q", path, w.Code, w.Body.String())
		}
	}
	if w := get(a, "/nothing"); w.Code != 404 {
		t.Errorf("/nothing: %d", w.Code)
	}
	for _, path := range []string{"/", "/stats", "/texts?text=a", "/readyz"} {
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d", path, w.Code)
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without a source succeeded")
	}
}

// getTexts asks /texts with q.
func getTexts(t testing.TB, a *Admin, q url.Values) (int, Answer, string) {
	t.Helper()
	w := get(a, "/texts?"+q.Encode())
	var ans Answer
	if w.Code == 200 {
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil {
			t.Fatalf("/texts: %v in %s", err, w.Body.String())
		}
	}
	return w.Code, ans, w.Body.String()
}

// TestTextsAnswers: /texts asks the counter each text's key, as the bot
// keys it (normalised with NORMALIZE, a message without text by its
// attachments), in every community or the one asked, all in one call,
// and answers the counts with the window.
func TestTextsAnswers(t *testing.T) {
	key := func(g int, text string, atts ...callback.Attachment) string {
		return bot.TextKey(callback.Message{GroupID: g, Text: text, Attachments: atts}, true)
	}
	sticker := callback.Attachment{Type: "sticker", StickerID: 9012}
	c := &counter{counts: map[string]int64{key(group, "hello world"): 3, key(8, "hello world"): 1, key(group, "", sticker): 2}}
	a := surface(t, sample(), c, nil)
	a.textsOpts.Normalize, a.textsOpts.Groups = true, []int{group, 8}
	code, ans, body := getTexts(t, a, url.Values{"text": {" Hello   World", "never"}})
	want := []TextCount{{GroupID: group, Text: " Hello   World", Count: 3}, {GroupID: group, Text: "never"}, {GroupID: 8, Text: " Hello   World", Count: 1}, {GroupID: 8, Text: "never"}}
	if code != 200 || ans.WindowSeconds != 86400 || !ans.Normalize || fmt.Sprint(ans.Texts) != fmt.Sprint(want) {
		t.Errorf("/texts: %d %s", code, body)
	}
	if c.calls != 1 || len(c.asked) != 4 {
		t.Errorf("/texts of 2 texts in 2 communities asked %d keys in %d calls, want 4 in one (one round trip)", len(c.asked), c.calls)
	}
	code, ans, body = getTexts(t, a, url.Values{"attachment": {"sticker:9012"}, "group": {"7"}})
	if code != 200 || len(ans.Texts) != 1 || ans.Texts[0].Count != 2 || fmt.Sprint(ans.Texts[0].Attachments) != "[sticker:9012]" {
		t.Errorf("/texts for the sticker: %d %s", code, body)
	}
}

// TestTextsBadQuestions: a wrong question is answered 400 (JSON) and
// reads nothing; a counter that fails is 503 with its error.
func TestTextsBadQuestions(t *testing.T) {
	c := &counter{}
	a := surface(t, sample(), c, nil)
	many := url.Values{}
	for i := range MaxAnswers + 1 {
		many.Add("text", fmt.Sprint(i))
	}
	for _, tc := range []struct {
		q    url.Values
		want string
	}{
		{url.Values{}, "no text to look up"},
		{url.Values{"text": {"a"}, "attachment": {"sticker:1"}}, "give texts or attachments, not both"},
		{url.Values{"attachment": {"sticker:x"}}, `attachment "sticker:x"`},
		{url.Values{"text": {"a"}, "group": {"5"}}, "community 5 is not served (served: 7)"},
		{url.Values{"text": {"a"}, "group": {"x"}}, `group "x": want a community id`},
		{url.Values{"text": {"a"}, "group": {"-1"}}, `group "-1": want a community id`},
		{many, "more than 1000"},
		{url.Values{"text": {"ok", "bad \xff byte"}}, "not UTF-8"},
	} {
		code, _, body := getTexts(t, a, tc.q)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("/texts?%.60s: %d %s; want 400 with %q", tc.q.Encode(), code, body, tc.want)
		}
	}
	if len(c.asked) != 0 {
		t.Errorf("wrong questions read %d keys", len(c.asked))
	}
	c.err = errors.New("LOADING Redis is loading the dataset in memory")
	if code, _, body := getTexts(t, a, url.Values{"text": {"a"}}); code != 503 || !strings.Contains(body, "redis: LOADING") {
		t.Errorf("/texts while Redis fails: %d %s; want 503 with its error", code, body)
	}
}

// TestTextsAtOnce: past MaxTextsAtOnce requests under way, /texts answers
// 503 with Retry-After at once, and serves again once one ends.
func TestTextsAtOnce(t *testing.T) {
	c := &counter{release: make(chan struct{}), started: make(chan struct{})}
	a := surface(t, sample(), c, nil)
	var wg sync.WaitGroup
	codes := make(chan int, MaxTextsAtOnce)
	for range MaxTextsAtOnce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- get(a, "/texts?text=a").Code
		}()
		<-c.started // under way, in Redis
	}
	w := get(a, "/texts?text=a")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "2 /texts requests are under way") {
		t.Errorf("/texts with %d under way: %d %q, want 503 with Retry-After", MaxTextsAtOnce, w.Code, w.Body.String())
	}
	close(c.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("a request under way answered %d", code)
		}
	}
	c.release = nil
	if w := get(a, "/texts?text=a"); w.Code != http.StatusOK {
		t.Errorf("/texts once they ended: %d, want 200", w.Code)
	}
}

var _ io.Writer = (*heldResponse)(nil)
