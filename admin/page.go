package admin

import (
	"bytes"
	"context"
	_ "embed"
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
)

// The status page (GET /) is one server-rendered HTML page, with no
// script and nothing fetched from elsewhere, that refreshes itself every
// Refresh. Its figures are Stats', as /stats serves them (and /metrics
// reads the same owners), plus the readiness /readyz gives and the
// per-minute History kept in memory. A view costs at most what one
// Readiness.Check costs (one PING of Redis, none while a call of the
// service's own was answered lately); everything else is read in the
// process.

// Refresh is how often the page reloads itself.
const Refresh = 5 * time.Second

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"bytes": Bytes,
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

// A Snapshot is one reading of the service, what the status page
// renders: Stats (what /stats encodes) and what the page shows beside
// it. Whoever fills it removes the secrets from its free text (VK's
// answers, errors); the page shows settings as given.
type Snapshot struct {
	Stats Stats
	// Reasons are why the service cannot take traffic (none: it is
	// ready); RedisErr says why Redis does not answer (nil: it does).
	// The page fills them from its Readiness.
	Reasons  []error
	RedisErr error
	// RedisWhere names the bot's Redis (without its password).
	RedisWhere string
	// CounterAddr is the counter port's address, or "off".
	CounterAddr string
	// Window is WINDOW as the settings write it (24h).
	Window string
	// Webhook says whether VK's webhook is served (VK_MODE=callback).
	Webhook bool
	// Communities are the communities served, in order.
	Communities []Community
	// Settings are every setting as the service runs with it, secrets
	// shown only as set or not set.
	Settings []Setting
}

// A Community is one community served and how many tokens it has (none:
// its replies are logged, in dry-run).
type Community struct {
	GroupID int
	Tokens  int
}

// A Setting is one setting's name and its value as in force.
type Setting struct{ Name, Value string }

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

// statusView is what the page shows.
type statusView struct {
	Stats      Stats
	Ready      bool
	Reasons    []string
	RedisErr   string // "" while Redis answers
	RedisWhere string
	Uptime     string
	Window     string // WINDOW, with its unit
	Counted    int64  // messages counted, each once: bot.received less bot.duplicates
	Mode       string
	Charts     []chart
	Opcodes    []rateRow
	HTTPRate   string
	Tokens     []tokenRow
	Drops      []dropRow
	Polling    []pollRow
	Settings   []Setting
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

// statusPage serves the page (View).
func (a *Admin) statusPage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := a.View(r.Context(), &buf, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(buf.Bytes())
}

// View writes the page as GET / serves it (before redaction) as of now:
// the source's Snapshot, with the readiness read within ctx.
func (a *Admin) View(ctx context.Context, w io.Writer, now time.Time) error {
	snap := a.src.Snapshot()
	snap.Reasons, snap.RedisErr = a.ready.Check(ctx)
	return a.Render(w, snap, now)
}

// Render writes the page of snap as of now; the view is observed by the
// History too, so that the minute under way is always known.
func (a *Admin) Render(w io.Writer, snap Snapshot, now time.Time) error {
	doc := snap.Stats
	v := statusView{
		Stats:       doc,
		Ready:       len(snap.Reasons) == 0,
		RedisWhere:  snap.RedisWhere,
		Uptime:      humanSeconds(time.Duration(doc.Service.UptimeSeconds).Seconds()),
		Mode:        doc.Service.Mode,
		CounterAddr: snap.CounterAddr,
		Refresh:     int(Refresh / time.Second),
		Now:         now.UTC().Format("2006-01-02 15:04:05 UTC"),
		Webhook:     snap.Webhook,
		Window:      snap.Window,
		Counted:     doc.Bot.Received - doc.Bot.Duplicates,
		Settings:    snap.Settings,
	}
	if doc.Service.DryRun {
		v.Mode += ", dry-run (replies are logged, not sent)"
	}
	for _, c := range snap.Communities {
		v.AnyDryRun = v.AnyDryRun || c.Tokens == 0
	}
	v.SeveralCommunities = len(snap.Communities) > 1
	for _, r := range callback.Reasons() {
		n := doc.Webhook.Rejected[r.String()]
		v.Rejected = append(v.Rejected, rejectRow{Reason: r.String(), Label: rejectLabels[r], N: n})
	}
	v.WrongSecret = doc.Webhook.Rejected[callback.WrongSecret.String()]
	for _, e := range snap.Reasons {
		v.Reasons = append(v.Reasons, e.Error())
	}
	if snap.RedisErr != nil {
		v.RedisErr = snap.RedisErr.Error()
	}
	live := totals(doc.Bot, doc.CounterPort)
	// A view samples too: the minute under way is then always known.
	a.history.ring.Observe(now, live)
	v.Charts = []chart{
		a.chart("Messages counted per minute", now, seriesMessages, live),
		a.chart(repliesTitle(doc.Service.DryRun, v.AnyDryRun), now, seriesReplies, live),
	}
	for i, op := range wire.Opcodes() {
		if n := live[seriesOpcodes+i]; n > 0 {
			v.Opcodes = append(v.Opcodes, rateRow{Name: op.String(), Total: n, PerSec: a.rate(now, seriesOpcodes+i)})
		}
	}
	v.HTTPRate = a.rate(now, seriesHTTP)
	v.Tokens = tokenRows(snap.Communities, doc.VK)
	for _, d := range doc.LastDrops {
		v.Drops = append(v.Drops, dropRow{At: d.At.UTC().Format("15:04:05"), GroupID: d.GroupID, PeerID: d.PeerID, Error: d.Error})
	}
	for _, g := range slices.Sorted(mapKeys(doc.Longpoll)) {
		s := doc.Longpoll[g]
		v.Polling = append(v.Polling, pollRow{Community: g, Polling: s.Polling, Messages: s.Messages})
	}
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
func (a *Admin) rate(now time.Time, s int) string {
	n, ok := a.history.ring.LastMinute(now, s)
	if !ok {
		return ""
	}
	return strconv.FormatFloat(float64(n)/60, 'f', 1, 64)
}

// chart draws series s of the history over the last hour.
func (a *Admin) chart(title string, now time.Time, s int, live []int64) chart {
	const width, height, step = 600, 100, 10
	per := a.history.ring.PerMinute(now, s, live[s])
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
func tokenRows(communities []Community, vk VKSection) []tokenRow {
	failures := vk.ConsecutiveFailures
	var rows []tokenRow
	for _, c := range communities {
		if c.Tokens == 0 {
			rows = append(rows, tokenRow{Community: c.GroupID, Token: "none", State: "dry-run"})
			continue
		}
		for _, st := range vk.Tokens {
			if st.Group != c.GroupID {
				continue
			}
			row := tokenRow{Community: c.GroupID, Token: fmt.Sprintf("%d of %d", st.Index+1, c.Tokens), State: st.State.String(), Checks: st.Checks}
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

// Bytes writes n bytes in MiB with one decimal.
func Bytes(n int64) string {
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
