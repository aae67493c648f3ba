package loadtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

const (
	group  = 77
	secret = "s3cret"
)

// A reply is one messages.send the fake bot makes. It quotes the message
// it answers as the real bot with REPLY_QUOTE=all does: forward in a
// group chat, reply_to in a dialog.
type reply struct {
	peer    int
	message string
	rid     int64
	cmid    int // quoted with forward when peer is a group chat
	replyTo int // else quoted with reply_to
}

// fakeBot is a webhook that counts like the real bot (in memory, or with a
// freq.Store) and replies through the fake VK API before it answers "ok",
// so every reply is in when the run ends. fault may change what it does
// with the k-th message_new it receives.
type fakeBot struct {
	t     testing.TB
	vk    *vktest.Server
	store *freq.Store // nil: count in memory
	// fault gets the reply due to the k-th distinct event and returns the
	// status to answer and the replies to send instead.
	fault func(k int, m callback.Message, n int64, r []reply) (status int, replies []reply)
	// countRetries makes the bot count a re-delivered event again.
	countRetries bool
	// eventIDOnly makes the bot recognise re-deliveries by event_id only,
	// so it counts a re-delivered message without one again.
	eventIDOnly bool
	// patient makes the bot retry a failed send until VK accepts it,
	// as the real bot's outbox does.
	patient bool
	// quietRetries makes the bot send no reply again for a re-delivered
	// event it answered "ok" (by default it sends the same reply again).
	quietRetries bool
	// retryAfter is the Retry-After header of a refusal, if not empty.
	retryAfter string

	mu     sync.Mutex // guards the fields below
	counts map[string]int64
	seen   map[string]int64 // event id (else message identity) → its number once answered "ok"
	index  map[string]int   // event id (else message identity) → k
	ids    []string         // event ids (else message identities) by k
	rids   map[string]int64 // event id (else message identity) → its reply's random_id
}

func newFakeBot(t testing.TB, vk *vktest.Server) (*fakeBot, string) {
	b := &fakeBot{t: t, vk: vk, counts: map[string]int64{}, seen: map[string]int64{}, index: map[string]int{}, rids: map[string]int64{}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL + "/callback"
}

// eventID returns the id of the k-th event received.
func (b *fakeBot) eventID(k int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[k]
}

func (b *fakeBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Type    string `json:"type"`
		GroupID int    `json:"group_id"`
		EventID string `json:"event_id"`
		Secret  string `json:"secret"`
		Object  struct {
			Message struct {
				ID     int    `json:"id"`
				CMID   int    `json:"conversation_message_id"`
				PeerID int    `json:"peer_id"`
				FromID int    `json:"from_id"`
				Text   string `json:"text"`
			} `json:"message"`
		} `json:"object"`
	}
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.GroupID != group || ev.Secret != secret {
		http.Error(w, "bad event", http.StatusForbidden)
		return
	}
	if ev.Type != "message_new" {
		w.Write([]byte("ok"))
		return
	}
	om := ev.Object.Message
	m := callback.Message{GroupID: ev.GroupID, EventID: ev.EventID, ID: om.ID, ConversationMessageID: om.CMID, PeerID: om.PeerID, FromID: om.FromID, Text: om.Text}

	b.mu.Lock()
	key := m.EventID // what re-deliveries are recognised by
	if key == "" {
		key = fmt.Sprintf("message %d:%d:%d", m.PeerID, m.ConversationMessageID, m.ID)
		if b.eventIDOnly {
			key = fmt.Sprintf("request %d", len(b.ids))
		}
	}
	k, known := b.index[key]
	if !known {
		k = len(b.ids)
		b.index[key] = k
		b.ids = append(b.ids, key)
		b.rids[key] = int64(k + 1) // the bot's own choice, kept for every send of the reply
	}
	rid := b.rids[key]
	n, retried := b.seen[key]
	retried = retried && !b.countRetries
	b.mu.Unlock()
	if !retried {
		n = b.count(r.Context(), m, key)
	}
	rp := reply{peer: m.PeerID, message: strconv.FormatInt(n, 10), rid: rid, replyTo: m.ID}
	if m.PeerID >= bot.ChatPeerBase {
		rp.cmid, rp.replyTo = m.ConversationMessageID, 0
	}
	status, replies := http.StatusOK, []reply{rp}
	if b.fault != nil && !retried {
		status, replies = b.fault(k, m, n, replies)
	}
	if status == http.StatusOK {
		b.mu.Lock()
		b.seen[key] = n
		b.mu.Unlock()
	} else if !retried {
		b.uncount(m) // as the real bot: not "ok" means not counted
	}
	if retried && b.quietRetries {
		replies = nil
	}
	for _, rp := range replies {
		b.send(rp)
	}
	if status != http.StatusOK {
		if b.retryAfter != "" {
			w.Header().Set("Retry-After", b.retryAfter)
		}
		http.Error(w, "unavailable", status)
		return
	}
	w.Write([]byte("ok"))
}

func (b *fakeBot) count(ctx context.Context, m callback.Message, key string) int64 {
	if b.store != nil {
		previous, _, err := b.store.Count(ctx, bot.TextKey(m, false), key)
		if err != nil {
			b.t.Errorf("count: %v", err)
		}
		return previous
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.counts[m.Text]
	b.counts[m.Text]++
	return n
}

func (b *fakeBot) uncount(m callback.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts[m.Text]--
}

func (b *fakeBot) send(rp reply) {
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := b.sendOnce(rp)
		if err == nil {
			return
		}
		if !b.patient || time.Now().After(deadline) {
			b.t.Errorf("send: %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendOnce makes one messages.send call and returns its transport or VK
// error.
func (b *fakeBot) sendOnce(rp reply) error {
	client := &http.Client{Timeout: time.Second}
	form := url.Values{
		"peer_id": {strconv.Itoa(rp.peer)}, "message": {rp.message},
		"random_id": {strconv.FormatInt(rp.rid, 10)}, "access_token": {"t"}, "v": {"5.199"},
	}
	if rp.cmid > 0 {
		form.Set("forward", fmt.Sprintf(`{"peer_id":%d,"conversation_message_ids":[%d],"is_reply":true}`, rp.peer, rp.cmid))
	} else if rp.replyTo > 0 {
		form.Set("reply_to", strconv.Itoa(rp.replyTo))
	}
	resp, err := client.PostForm(b.vk.MethodURL()+"messages.send", form)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Error *struct {
			Code int `json:"error_code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if answer.Error != nil {
		return fmt.Errorf("VK error %d", answer.Error.Code)
	}
	return nil
}

func newVK(t testing.TB) *vktest.Server {
	t.Helper()
	vk, err := vktest.Start(vktest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vk.Close)
	return vk
}

func options(u string, vk *vktest.Server) loadtest.CallbackOptions {
	return loadtest.CallbackOptions{
		URL: u, VK: vk, GroupID: group, Secret: secret,
		Texts: 6, PerText: 5, Concurrency: 1,
		Window: time.Hour, ReplyTimeout: 2 * time.Second,
	}
}

func run(t *testing.T, o loadtest.CallbackOptions) *loadtest.Report {
	t.Helper()
	rep, err := loadtest.RunCallback(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// problems returns the problem counts that are not zero.
func problems(rep *loadtest.Report) map[loadtest.ProblemKind]int64 {
	out := map[loadtest.ProblemKind]int64{}
	for k, v := range rep.Check.Problems {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestCorrectBotPasses(t *testing.T) {
	for _, conc := range []int{1, 8} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			vk := newVK(t)
			_, u := newFakeBot(t, vk)
			o := options(u, vk)
			o.Concurrency = conc
			o.RetryFraction = 0.2
			rep := run(t, o)
			if got := problems(rep); len(got) != 0 || !rep.OK() {
				t.Fatalf("problems %v in %+v", got, rep.Check.Listed)
			}
			if rep.Events != 30 || rep.Reposts != 6 || rep.Requests != 36 || rep.Check.Checked != 30 || rep.Check.Resent != 6 {
				t.Errorf("events %d reposts %d requests %d checked %d resent %d; want 30 6 36 30 6",
					rep.Events, rep.Reposts, rep.Requests, rep.Check.Checked, rep.Check.Resent)
			}
			if rep.Stopped != "done" || rep.Latency[0].Count != 36 || rep.Latency[1].Count != 30 {
				t.Errorf("stopped %q, latency %+v", rep.Stopped, rep.Latency)
			}
		})
	}
}

// TestRepliesToldApartByQuote: with several events per conversation,
// dialogs and group chats, each reply is told to be its event's by the
// message it quotes; a reply repeated without its quote, under the same
// random_id, is still that event's.
func TestRepliesToldApartByQuote(t *testing.T) {
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		if k%4 == 1 { // sent again without the quote, as after a refused quote
			again := r[0]
			again.cmid, again.replyTo = 0, 0
			r = append(r, again)
		}
		return http.StatusOK, r
	}
	o := options(u, vk)
	o.Peers, o.Concurrency = 10, 4 // conversation 9 is a group chat
	rep := run(t, o)
	if got := problems(rep); len(got) != 0 || rep.Check.Checked != 30 || rep.Check.Resent != 8 {
		t.Fatalf("problems %v, %d checked, %d resent; want none, 30, 8; listed %v", got, rep.Check.Checked, rep.Check.Resent, rep.Check.Listed)
	}
}

// TestCheckerCatchesBrokenBot drives the checker against a bot that answers
// "ok" but sends a wrong number, no reply, a duplicate reply, a reply to
// the wrong peer, a reply nobody asked for, and a reply with the random_id
// of an earlier one, which VK swallows.
func TestCheckerCatchesBrokenBot(t *testing.T) {
	t.Parallel() // mostly waits (the reply timeout, for a missing reply): alongside the other waiting tests
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		switch k {
		case 3:
			r[0].message = strconv.FormatInt(n+1, 10)
		case 5:
			r = nil
		case 7:
			again := r[0]
			again.rid += 1000
			r = append(r, again)
		case 8: // a dialog: its reply_to names the message wherever it goes
			r[0].peer += 1000
		case 11:
			r = append(r, reply{peer: 42, message: "7", rid: 4242})
		case 13:
			r[0].rid = 1 // the first reply's
		}
		return http.StatusOK, r
	}
	rep := run(t, options(u, vk))
	want := map[loadtest.ProblemKind]int64{
		loadtest.WrongNumber: 1, loadtest.Missing: 1, loadtest.Duplicate: 1,
		loadtest.WrongPeer: 1, loadtest.Unexpected: 1, loadtest.Swallowed: 1,
	}
	got := problems(rep)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problems %v, want %v; listed %v", got, want, rep.Check.Listed)
	}
	blamed := map[loadtest.ProblemKind]int{loadtest.WrongNumber: 3, loadtest.Missing: 5, loadtest.Duplicate: 7, loadtest.WrongPeer: 8, loadtest.Swallowed: 13}
	for _, p := range rep.Check.Listed {
		if k, ok := blamed[p.Kind]; ok && !strings.Contains(p.Subject, b.eventID(k)) {
			t.Errorf("%s blames %q, want event %s", p.Kind, p.Subject, b.eventID(k))
		}
		if p.Kind == loadtest.Unexpected && !strings.Contains(p.Subject, "peer 42") {
			t.Errorf("unexpected reply reported as %q", p.Subject)
		}
	}
	if rep.OK() {
		t.Error("a report with wrong answers says OK")
	}
}

// TestCheckerReportsRequestsVKsSchemaRefuses: a request the fake VK API
// refuses for breaking VK's schema is a problem of the run.
func TestCheckerReportsRequestsVKsSchemaRefuses(t *testing.T) {
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		if k == 2 { // as vksdk's MessagesSend would: user_ids is no parameter of messages.send
			resp, err := http.PostForm(vk.MethodURL()+"messages.send", url.Values{"peer_id": {"1"}, "message": {"x"},
				"random_id": {"999"}, "user_ids": {""}, "v": {"5.199"}, "access_token": {"t"}})
			if err == nil {
				resp.Body.Close()
			}
		}
		return http.StatusOK, r
	}
	rep := run(t, options(u, vk))
	want := map[loadtest.ProblemKind]int64{loadtest.BadRequest: 1}
	if got := problems(rep); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problems %v, want %v; listed %v", got, want, rep.Check.Listed)
	}
}

// TestCheckerCatchesCountedRetry: a bot that counts a re-delivered event
// again answers it with another number under the same random_id, and the
// text's next event skips a number.
func TestCheckerCatchesCountedRetry(t *testing.T) {
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.countRetries = true
	o := options(u, vk)
	o.RetryFraction = 0.1 // events 9, 19 and 29
	rep := run(t, o)
	conflicts := 0
	for _, p := range rep.Check.Listed {
		if p.Kind == loadtest.WrongNumber && strings.Contains(p.Want, "again for random_id") {
			conflicts++
		}
	}
	if conflicts != 3 || rep.Check.Problems[loadtest.WrongNumber] <= 3 {
		t.Fatalf("%d retries answered with another number, %d wrong numbers; want 3 and the texts' later numbers too; listed %v",
			conflicts, rep.Check.Problems[loadtest.WrongNumber], rep.Check.Listed)
	}
}

// TestStuckCounterUnderConcurrency: with events of a text in flight
// together only the set of numbers is known; a bot answering 0 to all is
// still caught.
func TestStuckCounterUnderConcurrency(t *testing.T) {
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		r[0].message = "0"
		return http.StatusOK, r
	}
	o := options(u, vk)
	o.Concurrency = 8
	rep := run(t, o)
	if got := rep.Check.Problems[loadtest.WrongNumber]; got != 24 {
		t.Fatalf("%d wrong numbers, want 24 (4 of each text's 5); listed %v", got, rep.Check.Listed)
	}
}

// TestUnavailableThenCounted: a 503 is retried like VK does; an event the
// bot never accepts is reported as not counted.
func TestUnavailableThenCounted(t *testing.T) {
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	var mu sync.Mutex
	refused := map[string]int{}
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		mu.Lock()
		defer mu.Unlock()
		refused[m.EventID]++
		if k == 2 && refused[m.EventID] == 1 || k == 4 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, r
	}
	o := options(u, vk)
	o.MaxAttempts = 3
	rep := run(t, o)
	want := map[loadtest.ProblemKind]int64{loadtest.NotCounted: 1}
	if got := problems(rep); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problems %v, want %v; listed %v", got, want, rep.Check.Listed)
	}
	if rep.Errors != 4 || rep.ErrorKinds["HTTP 503"] != 4 {
		t.Errorf("errors %d %v, want 4 × HTTP 503 (1 + 3 attempts)", rep.Errors, rep.ErrorKinds)
	}
}

// TestExpiredPrefill runs the prefill before the events, with the run's
// window: a bot with the same window answers as if the occurrences were
// not there, one with a longer window counts them, and the checker says
// so.
func TestExpiredPrefill(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		for _, tc := range []struct {
			name      string
			botWindow time.Duration
			wrong     int64
		}{
			{"same window", time.Hour, 0},
			{"bot window longer", 2 * time.Hour, 4 * 3}, // each text's 4 events are 3 too high
		} {
			t.Run(tc.name, func(t *testing.T) {
				vk := newVK(t)
				b, u := newFakeBot(t, vk)
				var err error
				if b.store, err = freq.New(tg.Client, freq.Options{Window: tc.botWindow, Prefix: prefix}); err != nil {
					t.Fatal(err)
				}
				o := options(u, vk)
				o.Texts, o.PerText, o.Expired = 3, 4, 3
				o.Prefill = func(ctx context.Context, texts []string, n int, window time.Duration) error {
					store, err := freq.New(tg.Client, freq.Options{Window: window, Prefix: prefix})
					if err != nil {
						return err
					}
					keys := func(yield func(string) bool) {
						for _, text := range texts {
							if !yield(bot.TextKey(callback.Message{GroupID: group, Text: text}, false)) {
								return
							}
						}
					}
					return store.Prefill(ctx, keys, n)
				}
				rep := run(t, o)
				if got := rep.Check.Problems[loadtest.WrongNumber]; got != tc.wrong || rep.Prefill <= 0 {
					t.Errorf("%d wrong numbers (prefill %v), want %d; listed %v", got, rep.Prefill, tc.wrong, rep.Check.Listed)
				}
			})
		}
	})
}

func TestDurationStopsPosting(t *testing.T) {
	vk := newVK(t)
	_, u := newFakeBot(t, vk)
	o := options(u, vk)
	o.Texts, o.PerText, o.Rate, o.Duration = 10, 100, 200, 100*time.Millisecond
	rep := run(t, o)
	if rep.Stopped != "duration" || rep.Events == 0 || rep.Events >= 1000 || !rep.OK() {
		t.Fatalf("stopped %q after %d events, problems %v", rep.Stopped, rep.Events, problems(rep))
	}
}

func TestRefusesRemoteAndBadOptions(t *testing.T) {
	vk := newVK(t)
	tests := []struct {
		name string
		edit func(*loadtest.CallbackOptions)
		want string
	}{
		{"remote", func(o *loadtest.CallbackOptions) { o.URL = "http://192.0.2.1/callback" }, "loopback"},
		{"named host", func(o *loadtest.CallbackOptions) { o.URL = "http://example.com/callback" }, "loopback"},
		{"retry fraction", func(o *loadtest.CallbackOptions) { o.RetryFraction = 1.5 }, "-retry-fraction 1.5: must be between 0 and 1"},
		{"expired without redis", func(o *loadtest.CallbackOptions) { o.Expired = 1 }, "Redis"},
		{"no fake VK", func(o *loadtest.CallbackOptions) { o.VK = nil }, "fake VK"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := options("http://127.0.0.1:1/callback", vk)
			tc.edit(&o)
			_, err := loadtest.RunCallback(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one about %s", err, tc.want)
			}
		})
	}
}

func TestBotNotAnswering(t *testing.T) {
	vk := newVK(t)
	_, err := loadtest.RunCallback(context.Background(), options("http://127.0.0.1:1/callback", vk))
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("error %v, want the bot not answering", err)
	}
	// Something answers, but serves no webhook: say what answered.
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	_, err = loadtest.RunCallback(context.Background(), options(notFound.URL+"/callback", vk))
	if err == nil || !strings.Contains(err.Error(), `answers 404 "404 page not found`) || !strings.Contains(err.Error(), "VK_MODE=longpoll") {
		t.Fatalf("error %v, want what answered and the long-poll hint", err)
	}
	_, u := newFakeBot(t, vk)
	o := options(u, vk)
	o.Secret = "wrong"
	if _, err := loadtest.RunCallback(context.Background(), o); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v, want a hint at the group id and secret", err)
	}
}

// TestCallbackProgressRateAndScenario: the last progress line's rate is
// the report's, over the time spent posting (not the wait for the replies
// after it), and the scenario counts in the right number.
func TestCallbackProgressRateAndScenario(t *testing.T) {
	vk := newVK(t)
	_, u := newFakeBot(t, vk)
	o := options(u, vk)
	o.Texts, o.PerText, o.Expired, o.Peers = 1, 3, 1, 1
	o.Prefill = func(context.Context, []string, int, time.Duration) error { return nil }
	var progress strings.Builder
	o.Progress = &progress
	rep := run(t, o)
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	want := fmt.Sprintf("events 3/3  %.0f/s  ", float64(rep.Events)/rep.Elapsed.Seconds())
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, want) {
		t.Errorf("last progress line %q, want it to begin %q", last, want)
	}
	for _, want := range []string{"1 text × 3,", "prefilled with 1 expired occurrence,", ", 1 conversation,"} {
		if !strings.Contains(rep.Scenario, want) {
			t.Errorf("scenario %q lacks %q", rep.Scenario, want)
		}
	}
}

// TestCallbackRefusalsNameTheOption: each bad option is named in its own
// error, without the package's name before it.
func TestCallbackRefusalsNameTheOption(t *testing.T) {
	vk := newVK(t)
	for _, tc := range []struct {
		edit func(*loadtest.CallbackOptions)
		want []string
	}{
		{func(o *loadtest.CallbackOptions) { o.Texts, o.Peers = -5, -1 }, []string{"-texts -5: must be at least 1", "-peers -1: must not be negative"}},
		{func(o *loadtest.CallbackOptions) { o.Concurrency = -1 }, []string{"-concurrency -1: must be at least 1"}},
		{func(o *loadtest.CallbackOptions) { o.Rate = math.NaN() }, []string{"-rate NaN: want a number"}},
		{func(o *loadtest.CallbackOptions) { o.ReplyTimeout = -time.Second }, []string{"-reply-timeout -1s: must be more than 0"}},
		{func(o *loadtest.CallbackOptions) { o.NoEventID = math.NaN() }, []string{"-no-event-id NaN: must be between 0 and 1"}},
	} {
		o := options("http://127.0.0.1:1/callback", vk)
		tc.edit(&o)
		_, err := loadtest.RunCallback(context.Background(), o)
		for _, want := range tc.want {
			if err == nil || strings.Contains(err.Error(), "loadtest:") || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
		}
	}
}
