package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

// An event is one simulated message_new and what became of it. Each is
// handled by one worker; the checker reads them after the workers end.
type event struct {
	id    string
	seq   int
	text  int // index of the text
	peer  int
	from  int
	msgID int  // message id; 0 in group chats
	cmid  int  // conversation_message_id
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

// callbackRun is one run of RunCallback.
type callbackRun struct {
	o      CallbackOptions
	client *http.Client
	runID  string
	texts  []string
	window time.Duration
	events []*event
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
// reply the bot sends to the fake VK API: one per event (told by the
// message it quotes, or by its conversation), to the event's peer,
// delivered once (a reply VK answers with an earlier message's id is
// swallowed), carrying the number of earlier occurrences of its text. For each text the numbers must be
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
		errors: map[string]int64{},
	}
	defer r.client.CloseIdleConnections()
	var err error
	if r.runID, err = newRunID(); err != nil {
		return nil, err
	}
	if err := r.waitReady(ctx); err != nil {
		return nil, err
	}
	r.window = o.Window
	if r.window == 0 {
		r.window = r.askWindow(ctx, r.statsURL())
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
	violations := len(o.VK.Violations())
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
	for _, v := range o.VK.Violations()[violations:] {
		rep.Check.add(Problem{Kind: BadRequest, Subject: "a request to the VK API", Want: "what VK's schema allows", Got: v})
	}
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
			if !r.o.Probe {
				return nil
			}
			return r.waitWired(ctx, deadline)
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

// statsURL is the bot's /stats: StatsURL, or, when empty, /stats beside
// the webhook ("" in long-poll mode).
func (r *callbackRun) statsURL() string {
	if r.o.StatsURL != "" || r.o.LongPoll {
		return r.o.StatsURL
	}
	u, _ := url.Parse(r.o.URL) // checked by Validate
	return u.Scheme + "://" + u.Host + "/stats"
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
