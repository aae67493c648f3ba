package main

import (
	"bytes"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/history"
)

// The status page (GET / on ADMIN_ADDR) is one server-rendered HTML page,
// with no script and nothing fetched from elsewhere, that refreshes itself
// every statusRefresh. Its figures are statsDoc's, as /stats serves them
// (and /metrics reads the same owners), plus the readiness /readyz gives
// and the per-minute history kept in memory. A view costs at most one PING
// of Redis (the readiness; none while a call of the service's own was
// answered lately); the history and everything else are read in the
// process.

// statusRefresh is how often the page reloads itself.
const statusRefresh = 5 * time.Second

// historyEvery is how often the history's totals are sampled: a minute's
// start is known within that time.
const historyEvery = 10 * time.Second

// The history's series: messages counted, replies sent (or logged, in
// dry-run), the /counters/ API's requests, then one per counter opcode.
const (
	seriesMessages = iota
	seriesReplies
	seriesHTTP
	seriesOpcodes
)

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"bytes": humanBytes,
	"secs":  humanSeconds,
	"half":  func(n int) int { return n / 2 },
	"shown": visible,
	"ago": func(a age.Seconds) string {
		if a < 0 {
			return "never"
		}
		return humanSeconds(time.Duration(a).Seconds()) + " ago"
	},
}).Parse(statusHTML))

// visible is s with its control and direction-formatting characters
// written as escapes (\u202e): a text from outside (a message, VK's error
// text) cannot reorder or hide what the page shows around it.
func visible(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hidden reports whether r changes the display of the text around it or
// shows nothing: a control character, or a bidirectional formatting one
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), or an invalid
// byte.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError
}

// historyTotals are the totals the history samples, in series order.
func (m *Main) historyTotals() []int64 {
	s := m.bot.Stats()
	t := m.metrics.Traffic()
	totals := make([]int64, seriesOpcodes+len(wire.Opcodes()))
	totals[seriesMessages] = s.Received - s.Duplicates
	totals[seriesReplies] = s.Sent + s.DryRun
	for _, n := range t.HTTP {
		totals[seriesHTTP] += n
	}
	for i, op := range wire.Opcodes() {
		totals[seriesOpcodes+i] = t.Requests[op.String()]
	}
	return totals
}

// sampleHistory starts the history's sampler, stopped by Close.
func (m *Main) sampleHistory() {
	m.history = history.New(seriesOpcodes + len(wire.Opcodes()))
	m.history.Observe(time.Now(), m.historyTotals())
	m.background.start(func(ctx context.Context) {
		t := time.NewTicker(historyEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				m.history.Observe(now, m.historyTotals())
			}
		}
	})
}

// statusView is what the page shows.
type statusView struct {
	Stats       statsDocument
	Ready       bool
	Reasons     []string
	RedisErr    string // "" while Redis answers
	RedisWhere  string
	Uptime      string
	Window      string // WINDOW, with its unit
	Counted     int64  // messages counted, each once: bot.received less bot.duplicates
	Mode        string
	Communities []int
	Charts      []chart
	Opcodes     []rateRow
	HTTPRate    string
	Tokens      []tokenRow
	Drops       []dropRow
	Polling     []pollRow
	Settings    []settingRow
	// Webhook is set in VK_MODE=callback; Rejected is its refusals by
	// reason, WrongSecret the ones for a wrong or missing secret.
	Webhook     bool
	Rejected    []rejectRow
	WrongSecret int64
	// SeveralCommunities: texts are shown with their community.
	SeveralCommunities bool
	// AnyDryRun: some community has no token, its replies are logged.
	AnyDryRun   bool
	CounterAddr string
	Refresh     int
	Now         string
}

// A chart is one per-minute series drawn as bars in an inline SVG, on a
// y-axis from 0 to Scale.
type chart struct {
	Title     string
	Total     int64
	LastHour  int64
	Max       int64
	Scale     int64  // the y-axis' top: Max rounded up to 1, 2 or 5 × 10^k, at least 2
	HalfScale string // its middle
	Bars      []bar
	Width     int
	Height    int
	Unmeasure bool // some minutes are unknown (before the start)
}

type bar struct {
	X, Y, W, H int
	Minute     string // how long ago, for the bar's title
	N          int64
}

type rateRow struct {
	Name   string
	Total  int64
	PerSec string // over the last whole minute; "" if unknown
}

type tokenRow struct {
	Community int
	Token     string // "1 of 2", or "none" in dry-run
	State     string // ok, retrying, halted, refused (tokens.State), dry-run
	Error     string
	Checks    int64  // times VK was asked about the token
	CheckedAt string // when VK last answered a check, UTC; "" before the first
}

type dropRow struct {
	At      string
	GroupID int
	PeerID  int
	Error   string
}

type pollRow struct {
	Community string
	Polling   bool
	Messages  int64
}

type settingRow struct{ Name, Value string }

// A rejectRow is the webhook's refusals of one reason (callback.Reason).
type rejectRow struct {
	Reason string // its name in /stats
	Label  string
	N      int64
}

// rejectLabels say each refusal reason on the page.
var rejectLabels = map[callback.Reason]string{
	callback.WrongSecret:      "wrong or missing secret",
	callback.UnknownCommunity: "unknown community (a group_id not served)",
	callback.NoConfirmation:   "confirmation asked, none configured",
	callback.Malformed:        "malformed (not a VK event)",
	callback.TooLarge:         "too large (over MAX_BODY_BYTES)",
	callback.WrongMethod:      "not a POST",
}

// statusPage serves the page.
func (m *Main) statusPage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := m.renderStatus(r.Context(), &buf, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(buf.Bytes())
}

// renderStatus writes the page as of now.
func (m *Main) renderStatus(ctx context.Context, w io.Writer, now time.Time) error {
	reasons, redisErr := m.readiness(ctx)
	doc := m.statsDoc()
	v := statusView{
		Stats:       doc,
		Ready:       len(reasons) == 0,
		RedisWhere:  redisWhere(m.cfg),
		Uptime:      humanSeconds(time.Duration(doc.Service.UptimeSeconds).Seconds()),
		Mode:        m.cfg.VKMode,
		Communities: m.groups,
		CounterAddr: m.CounterAddr(),
		Refresh:     int(statusRefresh / time.Second),
		Now:         now.UTC().Format("2006-01-02 15:04:05 UTC"),
	}
	if m.embedded != nil {
		v.RedisWhere = "embedded Redis (in this process)"
	}
	if doc.Service.DryRun {
		v.Mode += ", dry-run (replies are logged, not sent)"
	}
	if communities, err := m.cfg.Communities(); err == nil {
		for _, c := range communities {
			v.AnyDryRun = v.AnyDryRun || len(c.Tokens()) == 0
		}
	}
	v.Webhook = m.cfg.VKMode == ModeCallback
	v.Window = durDefault(m.cfg.Window)
	v.Counted = doc.Bot.Received - doc.Bot.Duplicates
	v.SeveralCommunities = len(m.groups) > 1
	for _, r := range callback.Reasons() {
		n := doc.Webhook.Rejected[r.String()]
		v.Rejected = append(v.Rejected, rejectRow{Reason: r.String(), Label: rejectLabels[r], N: n})
	}
	v.WrongSecret = doc.Webhook.Rejected[callback.WrongSecret.String()]
	for _, e := range reasons {
		v.Reasons = append(v.Reasons, e.Error())
	}
	if redisErr != nil {
		v.RedisErr = redisErr.Error()
	}
	live := m.historyTotals()
	// A view samples too: the minute under way is then always known.
	m.history.Observe(now, live)
	v.Charts = []chart{
		m.chart("Messages counted per minute", now, seriesMessages, live),
		m.chart(repliesTitle(doc.Service.DryRun, v.AnyDryRun), now, seriesReplies, live),
	}
	for i, op := range wire.Opcodes() {
		if n := live[seriesOpcodes+i]; n > 0 {
			v.Opcodes = append(v.Opcodes, rateRow{Name: op.String(), Total: n, PerSec: m.rate(now, seriesOpcodes+i)})
		}
	}
	v.HTTPRate = m.rate(now, seriesHTTP)
	v.Tokens = m.tokenRows(doc)
	for _, d := range doc.LastDrops {
		v.Drops = append(v.Drops, dropRow{At: d.At.UTC().Format("15:04:05"), GroupID: d.GroupID, PeerID: d.PeerID, Error: d.Error})
	}
	for _, g := range slices.Sorted(mapKeys(doc.Longpoll)) {
		s := doc.Longpoll[g]
		v.Polling = append(v.Polling, pollRow{Community: g, Polling: s.Polling, Messages: s.Messages})
	}
	v.Settings = m.settingRows()
	return statusTemplate.Execute(w, v)
}

// repliesTitle is the replies chart's title in the mode the service runs
// in: every community in dry-run (all), some (any), or none.
func repliesTitle(all, any bool) string {
	switch {
	case all:
		return "Replies logged per minute (dry-run: not sent)"
	case any:
		return "Replies sent per minute (logged, for the communities in dry-run)"
	}
	return "Replies sent per minute"
}

func mapKeys[V any](mp map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range mp {
			if !yield(k) {
				return
			}
		}
	}
}

// rate is series s's requests per second over the last whole minute.
func (m *Main) rate(now time.Time, s int) string {
	n, ok := m.history.LastMinute(now, s)
	if !ok {
		return ""
	}
	return strconv.FormatFloat(float64(n)/60, 'f', 1, 64)
}

// chart draws series s of the history over the last hour.
func (m *Main) chart(title string, now time.Time, s int, live []int64) chart {
	const width, height, step = 600, 100, 10
	per := m.history.PerMinute(now, s, live[s])
	c := chart{Title: title, Total: live[s], Width: width, Height: height}
	for _, n := range per {
		c.Max = max(c.Max, n)
		if n > 0 {
			c.LastHour += n
		}
		if n < 0 {
			c.Unmeasure = true
		}
	}
	c.Scale = axisScale(c.Max)
	c.HalfScale = strconv.FormatFloat(float64(c.Scale)/2, 'f', -1, 64)
	for k, n := range per {
		if n < 0 {
			continue
		}
		h := int(float64(n) / float64(c.Scale) * height)
		if n > 0 {
			h = max(h, 1)
		}
		ago := len(per) - 1 - k
		label := "this minute"
		if ago > 0 {
			label = strconv.Itoa(ago) + " min ago"
		}
		c.Bars = append(c.Bars, bar{X: k * step, Y: height - h, W: step - 2, H: h, Minute: label, N: n})
	}
	return c
}

// axisScale is the top of a y-axis showing max: the least 1, 2 or 5 ×
// 10^k at or above it, and at least 2 (so that its middle is whole).
func axisScale(max int64) int64 {
	for step := int64(1); ; step *= 10 {
		for _, f := range []int64{1, 2, 5} {
			if s := f * step; s >= max && s >= 2 {
				return s
			}
		}
	}
}

// tokenRows are the communities' tokens, one row each, as /stats gives
// them (vk.tokens: bot.Bot.Tokens, redacted, the source of the metrics'
// token states too): refused, halted, retrying or ok, with VK's last
// answer that was not an acceptance and how many times VK was asked; an
// ok token shows retrying while VK's calls go unanswered. A community
// without a token is in dry-run. Tokens are never shown, only numbered.
func (m *Main) tokenRows(doc statsDocument) []tokenRow {
	communities, _ := m.cfg.Communities()
	failures := doc.VK.ConsecutiveFailures
	var rows []tokenRow
	for _, c := range communities {
		n := len(c.Tokens())
		if n == 0 {
			rows = append(rows, tokenRow{Community: c.GroupID, Token: "none", State: "dry-run"})
			continue
		}
		for _, st := range doc.VK.Tokens {
			if st.Group != c.GroupID {
				continue
			}
			row := tokenRow{Community: c.GroupID, Token: fmt.Sprintf("%d of %d", st.Index+1, n), State: st.State.String(), Checks: st.Checks}
			if st.Err != nil {
				row.Error = st.Err.Error()
			}
			if !st.CheckedAt.IsZero() {
				row.CheckedAt = st.CheckedAt.UTC().Format("15:04:05")
			}
			if st.State == tokens.OK && failures > 0 {
				row.State = "retrying"
				row.Error = strconv.FormatInt(failures, 10) + " calls in a row got no answer"
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// settingRows are every setting's value as the process runs with it,
// secrets as set or not set.
func (m *Main) settingRows() []settingRow {
	var rows []settingRow
	for _, v := range settingValues(m.cfg) {
		val := v.val
		switch {
		case secretSetting(v.env) && val == "":
			val = "not set"
		case secretSetting(v.env):
			val = "set"
		default:
			val = m.inForce(v.env, v.value)
		}
		rows = append(rows, settingRow{Name: v.env, Value: val})
	}
	return rows
}

// settingUnits are the units of the numeric settings that have one
// (durations carry theirs).
var settingUnits = map[string]string{
	"MAX_BODY_BYTES":                "bytes",
	"RESOURCE_MAX_MEMORY":           "bytes",
	"COUNTERS_MEMORY_MAX_BYTES":     "bytes",
	"COUNTER_STATS_INTERVAL":        "s",
	"COUNTERS_REDIS_HEADROOM":       "% of maxmemory",
	"VK_RATE":                       "calls/s per token",
	"VK_BATCH":                      "replies per call",
	"OUTBOX_MAX_LEN":                "replies per community",
	"COUNTER_MAX_CONNECTIONS":       "connections",
	"HTTP_MAX_CONNECTIONS":          "connections per server",
	"COUNTER_BUCKETS":               "buckets",
	"COUNTERS_PARTICIPANT_MAX_KEYS": "keys per name",
	"COUNTERS_MEMORY_MAX_NAMES":     "names per kind",
	"COUNTERS_FILE_LEVELS":          "files per counter",
	"TOP_TEXTS":                     "texts",
}

// inForce writes the value v of the setting env as the service runs with
// it: a duration as written in the settings (24h), a number with its
// unit, an empty value as not set, and VK_GROUP_ID as the community it
// makes the service serve.
func (m *Main) inForce(env string, v flag.Value) string {
	if g, ok := v.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return durDefault(d)
		}
	}
	val := v.String()
	switch {
	case env == "VK_GROUP_ID" && m.cfg.VKGroups != "":
		return "not set (VK_GROUPS names the communities)"
	case env == "VK_GROUP_ID" && m.cfg.demo():
		return fmt.Sprintf("not set: demo community %d served, in dry-run", demoGroupID)
	case val == "":
		return "not set"
	}
	unit, ok := settingUnits[env]
	if !ok {
		return val
	}
	if n, err := strconv.ParseInt(val, 10, 64); err == nil && unit == "bytes" {
		return val + " bytes (" + humanBytes(n) + ")"
	}
	if env == "COUNTER_MAX_CONNECTIONS" && val == "0" || env == "HTTP_MAX_CONNECTIONS" && val == "0" {
		return "0 (unlimited)"
	}
	return val + " " + unit
}

// humanBytes writes n bytes in MiB with one decimal.
func humanBytes(n int64) string {
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// humanSeconds writes a duration in seconds as the largest units.
func humanSeconds(s float64) string {
	if s < 0 {
		return "never"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}
