package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/bot/msgkey"
	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

// CallbackOptions configure RunCallback. Zero fields mean the documented
// defaults.
type CallbackOptions struct {
	// URL is the bot's webhook, e.g. http://127.0.0.1:8080/callback.
	// Unused with LongPoll.
	URL string
	// LongPoll delivers the events through the fake VK API's Bots Long
	// Poll server instead of the webhook: the bot runs with VK_MODE=longpoll
	// and VK_API_URL pointing at VK. An event counts as answered "ok" once
	// the bot asks for the events after it (see vktest.LongPollAcked).
	LongPoll bool
	// VK is the fake VK API the bot sends its replies to.
	VK *vktest.Server
	// GroupID (default 1) and Secret are the community as the bot knows it.
	GroupID int
	Secret  string

	// Texts distinct texts are each sent PerText times (defaults 300 and
	// 10: the seed's first scenario; its second is 3000 × 1). Events go
	// round-robin over the texts.
	Texts, PerText int
	// Peers is how many conversations the events come from; zero means one
	// per event, so that every reply is attributed beyond doubt. Every
	// tenth conversation is a group chat.
	Peers int
	// Concurrency is the number of requests in flight (default 10).
	Concurrency int
	// Rate is new events per second; zero means as fast as the bot answers.
	Rate float64
	// Duration stops posting after that long; zero means once every event
	// is posted. Posting also stops before the bot's window runs out, as
	// older events would then leave the window and change the answers.
	Duration time.Duration
	// RetryFraction is the share of events that are posted a second time
	// once answered "ok", with the same event_id and X-Retry-Counter: 1, as
	// VK does when an "ok" is lost. They must be counted once.
	RetryFraction float64
	// NoEventID is the share of events posted without an event_id, as a
	// message can arrive: the bot must recognise their re-deliveries by
	// the message's own identity (group, peer_id,
	// conversation_message_id).
	NoEventID float64

	// Expired, when positive, stores that many occurrences of every text,
	// older than the window, in the bot's Redis before the run, as the
	// seed's fill_redis_expired.php: the run then measures the requests
	// that trim them. It needs Prefill.
	Expired int
	// Prefill stores n occurrences of every text, at distinct seconds
	// ending one second beyond window, where the bot counts them: it must
	// use the bot's own configuration (Redis, key prefix, normalisation,
	// community), as `vkcounter prefill` does.
	Prefill func(ctx context.Context, texts []string, n int, window time.Duration) error
	// Window is the bot's window. Zero means ask the bot (GET StatsURL),
	// or assume 24h if it does not say.
	Window time.Duration
	// StatsURL is the bot's /stats, on its admin address; empty means
	// /stats beside the webhook.
	StatsURL string

	// Wait is how long to wait for the bot to answer before the run; zero
	// means it must answer at once.
	Wait time.Duration
	// Timeout bounds each webhook request (default 10s).
	Timeout time.Duration
	// ReplyTimeout bounds the wait for replies after the last event
	// (default 10s).
	ReplyTimeout time.Duration
	// MaxAttempts is how many times an event is posted before it counts
	// as not counted (default 5). Failed attempts are posted again with
	// X-Retry-Counter, as VK re-delivers.
	MaxAttempts int
	// Faults is the fault schedule of the run (see ParseFaults): each is
	// applied at its time from the first event posted, for its duration.
	// The run lasts until posting is done and every fault has ended, then
	// waits ReplyTimeout for the replies. Redis faults need RedisProxy.
	Faults []Fault
	// RedisProxy is a proxy the bot reaches its Redis through, for the
	// Redis faults.
	RedisProxy *faultproxy.Proxy
	// StrictSends makes a reply sent again with the same random_id a
	// problem (RepeatedSend) rather than a resend VK drops: one counted
	// message, one messages.send. It is on whenever Faults are given: the
	// fake VK API's faults never lose an answer to a send it accepted, so
	// a bot never needs to repeat one.
	StrictSends bool

	// AllowRemote permits a webhook outside the loopback range.
	AllowRemote bool
	// Progress, if not nil, receives the live progress line.
	Progress io.Writer
}

func (o *CallbackOptions) setDefaults() {
	setDefault(&o.GroupID, DefaultGroupID)
	setDefault(&o.Texts, DefaultTexts)
	setDefault(&o.PerText, DefaultPerText)
	setDefault(&o.Concurrency, DefaultConcurrency)
	setDefault(&o.Timeout, DefaultTimeout)
	setDefault(&o.ReplyTimeout, DefaultReplyTimeout)
	setDefault(&o.MaxAttempts, DefaultMaxAttempts)
}

// setDefault sets *v to def if it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks o's values, each bad one in an error of its own (they
// are joined), named by its flag as `vkcounter loadtest callback` takes it.
// It is the one check of the options: the command runs it on its flags
// before anything starts, and RunCallback on o once the zero fields have
// their defaults; so 0 is refused where it means nothing of its own (the
// command's flags have their defaults already). Targets outside the
// loopback are refused unless AllowRemote.
func (o *CallbackOptions) Validate() error {
	errs := []error{
		atLeast("group", o.GroupID, 1),
		atLeast("texts", o.Texts, 1),
		atLeast("per-text", o.PerText, 1),
		atLeast("peers", o.Peers, 0), // 0: one per event
		atLeast("concurrency", o.Concurrency, 1),
		firstError(finite("rate", o.Rate), atLeast("rate", o.Rate, 0)), // 0: as fast as possible
		atLeast("duration", o.Duration, 0),                             // 0: until every event is posted
		fraction("retry-fraction", o.RetryFraction),
		fraction("no-event-id", o.NoEventID),
		atLeast("expired", o.Expired, 0),                                             // 0: none
		firstError(atLeast("window", o.Window, 0), wholeSeconds("window", o.Window)), // 0: ask the bot
		atLeast("wait", o.Wait, 0),                                                   // 0: the bot must answer at once
		positive("timeout", o.Timeout),
		positive("reply-timeout", o.ReplyTimeout),
		atLeast("attempts", o.MaxAttempts, 1),
	}
	if n := int64(o.Texts) * int64(o.PerText); n > MaxEvents {
		errs = append(errs, fmt.Errorf("-texts %d × -per-text %d = %d events: at most %d in a run", o.Texts, o.PerText, n, MaxEvents))
	}
	if o.URL != "" {
		errs = append(errs, checkURL("url", o.URL, o.AllowRemote))
	}
	if o.Window == 0 && o.StatsURL != "" { // the window is asked there
		errs = append(errs, checkURL("stats-url", o.StatsURL, o.AllowRemote))
	}
	return errors.Join(errs...)
}

// wholeSeconds refuses a duration of the flag name that is not whole
// seconds.
func wholeSeconds(name string, d time.Duration) error {
	if d%time.Second != 0 {
		return fmt.Errorf("-%s %v: must be whole seconds", name, d)
	}
	return nil
}

// wired checks what RunCallback needs besides valid values: the fake VK
// API, the webhook (unless LongPoll), a prefill for Expired, and a proxy
// for the Redis faults.
func (o *CallbackOptions) wired() error {
	var errs []error
	if o.VK == nil {
		errs = append(errs, errors.New("no fake VK API"))
	}
	if o.URL == "" && !o.LongPoll {
		errs = append(errs, errors.New("no webhook URL"))
	}
	if o.Expired > 0 && o.Prefill == nil {
		errs = append(errs, errors.New("expired occurrences need a prefill into the bot's Redis"))
	}
	for _, f := range o.Faults {
		if _, ok := faultSpecs[f.Kind]; !ok {
			errs = append(errs, fmt.Errorf("fault %s: unknown kind", f))
		} else if f.Redis() && o.RedisProxy == nil {
			errs = append(errs, fmt.Errorf("fault %s: Redis faults need a proxy in front of the bot's Redis", f))
		}
	}
	return errors.Join(errs...)
}

// An event is one simulated message_new and what became of it. Each is
// handled by one worker; the checker reads them after the workers end.
type event struct {
	id    string
	seq   int
	text  int // index of the text
	peer  int
	from  int
	msgID int // message id; 0 in group chats
	cmid  int // conversation_message_id
	rid   int64
	bare  bool // posted without event_id (id still names it in reports)

	start time.Time // first attempt
	acked time.Time // first "ok"
	state eventState

	sends []vktest.Send // replies attributed to this event, in arrival order
}

type eventState int

const (
	notSent     eventState = iota
	counted                // answered "ok"
	failed                 // every attempt failed
	interrupted            // the run was interrupted while posting it
)

// replyKey identifies a reply as VK deduplicates it.
type replyKey struct {
	peer int
	rid  int64
}

// callbackRun is one run of RunCallback.
type callbackRun struct {
	o      CallbackOptions
	client *http.Client
	runID  string
	texts  []string
	window time.Duration
	events []*event
	byKey  map[replyKey]*event
	start  time.Time

	webhook *series
	next    atomic.Int64 // index of the next event to hand to a worker
	posted  atomic.Int64 // events done (counted or not)
	reqs    atomic.Int64
	reposts atomic.Int64
	replies atomic.Int64
	// sent is how long posting lasted (Report.Elapsed), set once it
	// ended: the progress line's rate is then over that time too, not
	// over the wait for the replies that follows.
	sent atomic.Int64

	mu     sync.Mutex // guards errors
	errors map[string]int64

	lp longPollRun // with LongPoll
}

// RunCallback posts message_new events to a bot's webhook and checks every
// reply the bot sends to the fake VK API: one per event, to the event's
// peer, with the random_id derived from the message, carrying the number
// of earlier occurrences of its text. For each text the numbers must be
// exactly 0 … n−1 (n its events counted), and in that order when the
// text's events were not in flight together.
//
// Setup failures (bad options, a target outside the loopback, a bot that
// does not answer) are errors; wrong answers are in the Report.
func RunCallback(ctx context.Context, o CallbackOptions) (*Report, error) {
	o.setDefaults()
	if err := errors.Join(o.Validate(), o.wired()); err != nil {
		return nil, err
	}
	r := &callbackRun{
		o:      o,
		client: newHTTPClient(o.Concurrency, o.Timeout),
		byKey:  map[replyKey]*event{},
		errors: map[string]int64{},
	}
	defer r.client.CloseIdleConnections()
	if err := r.waitReady(ctx); err != nil {
		return nil, err
	}
	r.window = o.Window
	if r.window == 0 {
		stats := o.StatsURL
		if stats == "" && !o.LongPoll {
			u, _ := url.Parse(o.URL) // checked by Validate
			stats = u.Scheme + "://" + u.Host + "/stats"
		}
		r.window = r.askWindow(ctx, stats)
	}
	var err error
	if r.runID, err = newRunID(); err != nil {
		return nil, err
	}
	r.plan()

	rep := &Report{Tool: "callback", Scenario: r.describe(), Target: o.URL, Check: newCheck(callbackKinds)}
	if o.LongPoll {
		rep.Target = "long poll of " + o.VK.MethodURL()
	}
	if o.Expired > 0 {
		begin := time.Now()
		if err := r.prefill(ctx); err != nil {
			return nil, err
		}
		rep.Prefill = time.Since(begin)
	}

	baseline := len(o.VK.SendsFrom(0))
	r.start = time.Now()
	rep.Started = r.start
	r.webhook = newSeries("webhook", r.start)
	if o.LongPoll {
		r.webhook = newSeries("long poll", r.start)
	}
	collected := make(chan []vktest.Send, 1)
	stopCollect := make(chan struct{})
	go func() { collected <- r.collect(baseline, stopCollect) }()

	faults := startFaults(ctx, &faultInjector{proxy: o.RedisProxy, vk: o.VK, peers: r.upcomingPeers}, r.start, o.Faults)
	prog := startProgress(o.Progress, func() string {
		h := r.webhook.snapshot()
		return statusLine("events", r.posted.Load(), int64(len(r.events)), sinceOr(r.start, &r.sent), r.errorCount(), h.Quantile(0.99)) +
			fmt.Sprintf("  replies %d", r.replies.Load())
	})
	rep.Stopped = r.post(ctx)
	if o.LongPoll {
		r.awaitAcks(ctx)
	}
	rep.Elapsed = time.Since(r.start)
	r.sent.Store(int64(rep.Elapsed))
	rep.Faults = faults() // the run lasts until every fault has ended
	close(stopCollect)
	sends := <-collected
	prog.Stop()

	rep.Requests = r.reqs.Load()
	rep.Reposts = r.reposts.Load()
	rep.ErrorKinds = r.errors
	rep.Errors = r.errorCount()
	for _, e := range r.events {
		if e.state != notSent {
			rep.Events++
		}
	}
	replyName := "webhook→reply"
	if o.LongPoll {
		replyName = "queued→reply"
	}
	reply := newSeries(replyName, r.start)
	r.check(sends, &rep.Check, reply)
	rep.charts = []chartSeries{r.webhook.chart(), reply.chart()}
	for _, c := range rep.charts {
		rep.Latency = append(rep.Latency, c.Hist.Summary(c.Name))
	}
	return rep, nil
}

func newHTTPClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
	}
}

func newRunID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (r *callbackRun) describe() string {
	o := r.o
	texts := plural(o.Texts, "text", "texts")
	s := fmt.Sprintf("%s × %d, concurrency %d, ", texts, o.PerText, o.Concurrency)
	if o.LongPoll {
		s = fmt.Sprintf("%s × %d through Bots Long Poll, ", texts, o.PerText)
	}
	if o.Rate > 0 {
		s += fmt.Sprintf("%g events/s", o.Rate)
	} else {
		s += "as fast as possible"
	}
	if o.Duration > 0 {
		s += ", at most " + o.Duration.String()
	}
	if o.RetryFraction > 0 {
		s += fmt.Sprintf(", %g%% re-posted", 100*o.RetryFraction)
	}
	if o.NoEventID > 0 {
		s += fmt.Sprintf(", %g%% without event_id", 100*o.NoEventID)
	}
	if o.Expired > 0 {
		s += ", each text prefilled with " + plural(o.Expired, "expired occurrence", "expired occurrences")
	}
	if o.Peers > 0 {
		s += ", " + plural(o.Peers, "conversation", "conversations")
	}
	if len(o.Faults) > 0 {
		specs := make([]string, len(o.Faults))
		for i, f := range o.Faults {
			specs[i] = f.String()
		}
		s += ", faults " + strings.Join(specs, ",")
	}
	return s + ", window " + r.window.String()
}

// waitReady posts an event the bot must answer "ok" without counting it
// (typing in a dialog) until it does, for up to o.Wait. Any other answer,
// such as 403 for a wrong group or secret, fails at once.
func (r *callbackRun) waitReady(ctx context.Context) error {
	if r.o.LongPoll {
		return r.waitPolling(ctx)
	}
	body, _ := json.Marshal(map[string]any{
		"type": "message_typing_state", "group_id": r.o.GroupID, "event_id": "loadtest-probe", "v": vkapi.Version, "secret": r.o.Secret,
		"object": map[string]any{"state": "typing", "from_id": userBase, "to_id": -r.o.GroupID},
	})
	deadline := time.Now().Add(r.o.Wait)
	for {
		status, answer, _, err := r.do(ctx, body, 0)
		switch {
		case err == nil && status == http.StatusOK && answer == "ok":
			return nil
		case err == nil && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed):
			return fmt.Errorf("%s answers %d %q: no webhook is served there (a service in VK_MODE=longpoll serves none: use -longpoll; otherwise check CALLBACK_PATH)", r.o.URL, status, answer)
		case err == nil:
			return fmt.Errorf("the bot answered an event of group %d with %d %q, not ok: check the group id and secret", r.o.GroupID, status, answer)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the bot at %s does not answer: %w", r.o.URL, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// askWindow reads window_seconds from the bot's /stats, or returns
// defaultWindow.
func (r *callbackRun) askWindow(ctx context.Context, statsURL string) time.Duration {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return defaultWindow
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return defaultWindow
	}
	defer resp.Body.Close()
	var stats struct {
		WindowSeconds int64 `json:"window_seconds"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&stats) != nil || stats.WindowSeconds <= 0 {
		return defaultWindow
	}
	return time.Duration(stats.WindowSeconds) * time.Second
}

// plan builds every event: texts round-robin, each event from its own
// conversation (or Peers of them), numbered in its conversation, with the
// random_id the bot must derive from it.
func (r *callbackRun) plan() {
	o := r.o
	r.texts = make([]string, o.Texts)
	for i := range r.texts {
		// Capitalised, so that a bot with NORMALIZE counts it under
		// another identity than one without.
		r.texts[i] = fmt.Sprintf("Нагрузка %s %d", r.runID, i)
	}
	n := o.Texts * o.PerText
	r.events = make([]*event, n)
	// Message numbers start at a base of this run's own, so that a second
	// run's messages are new messages to the bot (and to VK, whose
	// random_id dedupe would drop replies to reused numbers).
	runNum, _ := strconv.ParseUint(r.runID, 16, 32)
	base := int(runNum&0x7fffffff) << 20
	cmids := map[int]int{}
	for seq := range n {
		conv := seq
		if o.Peers > 0 {
			conv = seq % o.Peers
		}
		e := &event{id: fmt.Sprintf("lt%s%08x", r.runID, seq), seq: seq, text: seq % o.Texts, from: userBase + conv, bare: picked(seq, o.NoEventID)}
		e.peer, e.msgID = e.from, base+seq+1
		if conv%chatEvery == chatEvery-1 {
			e.peer, e.msgID = chatPeerBase+1+conv/chatEvery, 0
		}
		if _, ok := cmids[e.peer]; !ok {
			cmids[e.peer] = base
		}
		for { // a (peer, random_id) must name one event: skip a colliding number
			cmids[e.peer]++
			e.cmid = cmids[e.peer]
			e.rid = int64(msgkey.Message{GroupID: r.o.GroupID, PeerID: e.peer, ConversationMessageID: e.cmid, ID: e.msgID, EventID: e.eventID()}.RandomID())
			if r.byKey[replyKey{e.peer, e.rid}] == nil {
				break
			}
		}
		r.byKey[replyKey{e.peer, e.rid}] = e
		r.events[seq] = e
	}
}

// eventID is the event_id e is posted with: empty for a bare event.
func (e *event) eventID() string {
	if e.bare {
		return ""
	}
	return e.id
}

// picked tells whether the event numbered seq is one of a share f of all
// events, spread evenly: exactly floor(n·f) of the first n are (Bresenham).
func picked(seq int, f float64) bool {
	return int(float64(seq+1)*f) > int(float64(seq)*f)
}

// body is e as VK posts it (API 5.199).
func (r *callbackRun) body(e *event) []byte {
	type message struct {
		Date        int64  `json:"date"`
		FromID      int    `json:"from_id"`
		ID          int    `json:"id"`
		Out         int    `json:"out"`
		Attachments []any  `json:"attachments"`
		CMID        int    `json:"conversation_message_id"`
		Text        string `json:"text"`
		PeerID      int    `json:"peer_id"`
		RandomID    int    `json:"random_id"`
	}
	type clientInfo struct {
		ButtonActions []string `json:"button_actions"`
		Keyboard      bool     `json:"keyboard"`
		LangID        int      `json:"lang_id"`
	}
	v := struct {
		GroupID int    `json:"group_id"`
		Type    string `json:"type"`
		EventID string `json:"event_id,omitempty"`
		V       string `json:"v"`
		Object  struct {
			Message    message    `json:"message"`
			ClientInfo clientInfo `json:"client_info"`
		} `json:"object"`
		Secret string `json:"secret,omitempty"`
	}{GroupID: r.o.GroupID, Type: "message_new", EventID: e.eventID(), V: vkapi.Version, Secret: r.o.Secret}
	v.Object.Message = message{
		Date: time.Now().Unix(), FromID: e.from, ID: e.msgID, Attachments: []any{},
		CMID: e.cmid, Text: r.texts[e.text], PeerID: e.peer,
	}
	v.Object.ClientInfo = clientInfo{ButtonActions: []string{"text"}, Keyboard: true}
	b, _ := json.Marshal(v) // cannot fail: plain values only
	return b
}

// prefill stores o.Expired occurrences of every text beyond the window,
// through the bot's own configuration.
func (r *callbackRun) prefill(ctx context.Context) error {
	if err := r.o.Prefill(ctx, r.texts, r.o.Expired, r.window); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	return nil
}

// post posts every event from o.Concurrency workers, at o.Rate, until all
// are posted or the time is up, and says why it stopped. Requests in flight
// when the time is up still finish.
func (r *callbackRun) post(ctx context.Context) string {
	limit, stopped := r.o.Duration, "duration"
	// Keep every text's events inside the window, with a margin for
	// clock steps and the time a request spends in the bot.
	if w := r.window - max(2*time.Second, r.window/10); w > 0 && (limit == 0 || w < limit) {
		limit, stopped = w, "window"
	}
	if limit == 0 {
		limit = 1<<63 - 1
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()

	jobs := make(chan *event)
	var wg sync.WaitGroup
	work, workers := r.postEvent, r.o.Concurrency
	if r.o.LongPoll {
		// One worker queues the events in order, as VK numbers them.
		r.startAcks(ctx)
		work, workers = r.queueEvent, 1
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				work(ctx, e)
			}
		}()
	}
	defer wg.Wait()
	defer close(jobs)
	for i, e := range r.events {
		var due <-chan time.Time
		if r.o.Rate > 0 {
			if wait := time.Until(r.start.Add(time.Duration(float64(i) / r.o.Rate * 1e9))); wait > 0 {
				due = time.After(wait)
			}
		}
		if due != nil {
			select {
			case <-due:
			case <-timer.C:
				return stopped
			case <-ctx.Done():
				return "interrupted"
			}
		}
		select {
		case jobs <- e:
			r.next.Store(int64(i + 1))
		case <-timer.C:
			return stopped
		case <-ctx.Done():
			return "interrupted"
		}
	}
	return "done"
}

// upcomingPeers returns the distinct conversations of the next events to
// be posted, at most n.
func (r *callbackRun) upcomingPeers(n int) []int {
	var out []int
	seen := map[int]bool{}
	for i := int(r.next.Load()); i < len(r.events) && len(out) < n; i++ {
		if p := r.events[i].peer; !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// postEvent posts e until it is answered "ok", then re-posts it if it is
// one of the RetryFraction.
func (r *callbackRun) postEvent(ctx context.Context, e *event) {
	defer r.posted.Add(1)
	e.start = time.Now()
	body := r.body(e)
	e.state = r.deliver(ctx, body, 0)
	if e.state != counted {
		return
	}
	e.acked = time.Now()
	if picked(e.seq, r.o.RetryFraction) {
		r.reposts.Add(1)
		r.deliver(ctx, body, 1)
	}
}

// deliver posts body until the bot answers "ok", at most MaxAttempts
// times, each retry with the next X-Retry-Counter. As VK does, it waits the
// Retry-After of a refusal (at most maxRetryAfter) before the next
// attempt, else a short backoff.
func (r *callbackRun) deliver(ctx context.Context, body []byte, retry int) eventState {
	backoff := 50 * time.Millisecond
	for attempt := range r.o.MaxAttempts {
		begin := time.Now()
		status, answer, retryAfter, err := r.do(ctx, body, retry+attempt)
		r.webhook.record(begin, time.Since(begin))
		r.reqs.Add(1)
		switch {
		case err == nil && status == http.StatusOK && answer == "ok":
			return counted
		case ctx.Err() != nil:
			return interrupted
		case err != nil:
			r.addError("network")
		case status == http.StatusOK:
			r.addError(fmt.Sprintf("answer %.20q", answer))
		default:
			r.addError("HTTP " + strconv.Itoa(status))
		}
		if attempt == r.o.MaxAttempts-1 {
			break
		}
		wait := backoff
		if retryAfter > 0 {
			wait = min(retryAfter, maxRetryAfter)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return interrupted
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return failed
}

// do posts body once and returns the status, the start of the answer and
// its Retry-After (zero if none, or not in seconds).
func (r *callbackRun) do(ctx context.Context, body []byte, retry int) (int, string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if retry > 0 {
		req.Header.Set(headerRetryCounter, strconv.Itoa(retry))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, resp.Body) // let the connection be reused
	var retryAfter time.Duration
	if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
		retryAfter = time.Duration(secs) * time.Second
	}
	return resp.StatusCode, string(answer), retryAfter, err
}

func (r *callbackRun) addError(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[kind]++
}

func (r *callbackRun) errorCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, v := range r.errors {
		n += v
	}
	return n
}

// collect reads the sends the fake VK API accepts after the first baseline
// until stop is closed, then until every counted event has a reply or
// ReplyTimeout passes, then for a short while more to catch late
// duplicates. It returns them in arrival order.
func (r *callbackRun) collect(baseline int, stop <-chan struct{}) []vktest.Send {
	var sends []vktest.Send
	answered := map[replyKey]bool{}
	poll := func() int {
		fresh := r.o.VK.SendsFrom(baseline + len(sends))
		for _, s := range fresh {
			answered[replyKey{s.PeerID, s.RandomID}] = true
		}
		sends = append(sends, fresh...)
		r.replies.Store(int64(len(sends)))
		return len(fresh)
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			poll()
		case <-stop:
			running = false
		}
	}
	// Posting is over: every event's state is final and visible here.
	var waiting []*event
	for _, e := range r.events {
		if e.state == counted {
			waiting = append(waiting, e)
		}
	}
	deadline := time.Now().Add(r.o.ReplyTimeout)
	var quietSince time.Time
	for time.Now().Before(deadline) {
		if poll() > 0 {
			quietSince = time.Time{}
		}
		for len(waiting) > 0 && answered[replyKey{waiting[0].peer, waiting[0].rid}] {
			waiting = waiting[1:]
		}
		if len(waiting) == 0 {
			if quietSince.IsZero() {
				quietSince = time.Now()
			} else if time.Since(quietSince) >= settle {
				break
			}
		}
		<-tick.C
	}
	poll()
	return sends
}
