package longpoll_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

const group = 77

// recorder is a MessageHandler that records the event ids it handled and
// can be told to fail.
type recorder struct {
	mu      sync.Mutex
	handled []string
	fails   int // the next fails calls fail
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) HandleMessage(_ context.Context, m callback.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fails > 0 {
		r.fails--
		return errors.New("storage down")
	}
	r.handled = append(r.handled, m.EventID)
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return nil
}

// wait waits until n messages were handled and returns their event ids.
func (r *recorder) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got := append([]string(nil), r.handled...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("%d of %d messages handled: %v", len(got), n, got)
		}
	}
}

func message(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"message_new","event_id":"e%d","v":"5.199","group_id":%d,`+
		`"object":{"message":{"id":%d,"peer_id":5,"from_id":5,"conversation_message_id":%d,"text":"t%d"},"client_info":{}}}`,
		i, group, i, i, i))
}

func queue(vk *vktest.Server, from, to int) {
	var evs []json.RawMessage
	for i := from; i < to; i++ {
		evs = append(evs, message(i))
	}
	vk.QueueEvents(group, evs...)
}

type env struct {
	vk    *vktest.Server
	mr    *miniredis.Miniredis
	store *longpoll.RedisStore
}

func newEnv(t *testing.T) *env {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	return &env{vk: vk, mr: mr, store: newStore(t, rdb)}
}

// newStore is longpoll.NewRedisStore on rdb, with the tests' prefix.
func newStore(t *testing.T, rdb redis.UniversalClient) *longpoll.RedisStore {
	t.Helper()
	s, err := longpoll.NewRedisStore(rdb, "t:")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs a poller until the returned stop is called.
func (e *env) start(t *testing.T, h callback.MessageHandler, owner string) (*longpoll.Poller, func()) {
	return e.startWith(t, h, longpoll.Options{Owner: owner})
}

// startWith runs a poller with opts completed for the test (a LeaseTTL of
// its own is kept).
func (e *env) startWith(t *testing.T, h callback.MessageHandler, opts longpoll.Options) (*longpoll.Poller, func()) {
	t.Helper()
	opts.GroupID, opts.Handler, opts.Store = group, h, e.store
	testOptions(&opts, e.vk)
	p, err := longpoll.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return p, stop
}

// testOptions sets the API and quick timings in opts (a LeaseTTL of its own
// is kept).
func testOptions(opts *longpoll.Options, vk *vktest.Server) {
	opts.API = vkapi.New("tok", vkapi.Options{MethodURL: vk.MethodURL()})
	opts.Wait, opts.RetryBase, opts.RetryMax = time.Second, 10*time.Millisecond, 50*time.Millisecond
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 600 * time.Millisecond
	}
}

// waitSession waits until the poller has a long-poll session going.
func (e *env) waitSession(t *testing.T) {
	t.Helper()
	waitSession(t, e.vk)
}

func waitSession(t *testing.T, vk *vktest.Server) {
	t.Helper()
	// A session whose ts was read: events queued from now on come after it.
	eventually.True(t, 5*time.Second, "a long-poll session started", func() bool { return vk.LongPollSessions(group) > 0 })
}

// wantEach checks that got holds e<from>…e<to-1>, each exactly once, in order.
func wantEach(t *testing.T, got []string, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("handled %d messages, want %d: %v", len(got), to-from, got)
	}
	for i, id := range got {
		if want := fmt.Sprintf("e%d", from+i); id != want {
			t.Fatalf("message #%d is %s, want %s (all: %v)", i, id, want, got)
		}
	}
}

func TestFailuresLoseNothing(t *testing.T) {
	for _, code := range []int{vktest.FailedHistory, vktest.FailedKey, vktest.FailedLost} {
		t.Run(fmt.Sprintf("failed %d", code), func(t *testing.T) {
			e := newEnv(t)
			e.vk.SetLongPollBatch(3)
			rec := newRecorder()
			p, _ := e.start(t, rec, "a")
			e.waitSession(t)
			queue(e.vk, 0, 5)
			rec.wait(t, 5)
			e.vk.FailLongPoll(group, code)
			queue(e.vk, 5, 10)
			wantEach(t, rec.wait(t, 10), 0, 10)
			s := p.Stats()
			if got := []int64{0, s.Failed1, s.Failed2, s.Failed3}[code]; got != 1 {
				t.Errorf("stats %+v: want one failed %d", s, code)
			}
			if code != vktest.FailedHistory && e.vk.Calls("groups.getLongPollServer") != 2 {
				t.Errorf("%d calls of groups.getLongPollServer, want 2 (a new key)", e.vk.Calls("groups.getLongPollServer"))
			}
		})
	}
}

func TestFailedThreeTwiceTakesTheNewTS(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	p, _ := e.start(t, rec, "a")
	e.waitSession(t)
	e.vk.FailLongPoll(group, vktest.FailedLost, vktest.FailedLost)
	queue(e.vk, 0, 3)
	// Both failures answer before the events are asked for, so the second
	// one moves ts to the newest event: those queued before are skipped,
	// as VK's documentation has it; the next ones arrive.
	eventually.True(t, 5*time.Second, "two failed 3", func() bool { return p.Stats().Failed3 == 2 })
	// The poller counts the failure before it asks for the new session:
	// wait until it polls from the new ts, or the next events would be
	// queued before that ts is chosen and skipped too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.vk.WaitLongPollAcked(ctx, group, 3); err != nil {
		t.Fatal(err)
	}
	queue(e.vk, 3, 5)
	wantEach(t, rec.wait(t, 2), 3, 5)
}

func TestHandlerFailureReplays(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	rec.fails = 3 // storage down for three attempts
	p, _ := e.start(t, rec, "a")
	e.waitSession(t)
	queue(e.vk, 0, 4)
	wantEach(t, rec.wait(t, 4), 0, 4)
	// The poller counts a message once HandleMessage has returned.
	eventually.True(t, 5*time.Second, "4 messages counted", func() bool { return p.Stats().Messages == 4 })
	if s := p.Stats(); s.Retries < 3 || s.Messages != 4 {
		t.Errorf("stats %+v: want 3 retries and 4 messages", s)
	}
}

func TestRestartResumesFromSavedTS(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	_, stop := e.start(t, rec, "a")
	e.waitSession(t)
	queue(e.vk, 0, 3)
	rec.wait(t, 3)
	stop()
	queue(e.vk, 3, 8) // while no poller runs
	rec2 := newRecorder()
	e.start(t, rec2, "b")
	queue(e.vk, 8, 10)
	wantEach(t, rec2.wait(t, 7), 3, 10)
}

func TestOnePollerPerCommunity(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	a, stopA := e.start(t, rec, "a")
	e.waitSession(t)
	b, _ := e.start(t, rec, "b")
	queue(e.vk, 0, 5)
	rec.wait(t, 5)
	if a.Stats().Sessions != 1 || b.Stats().Sessions != 0 {
		t.Fatalf("sessions: a %+v, b %+v; want a polling and b standing by", a.Stats(), b.Stats())
	}
	stopA() // releases the lease: b takes over
	queue(e.vk, 5, 9)
	wantEach(t, rec.wait(t, 9), 0, 9)
	if b.Stats().Sessions != 1 {
		t.Errorf("b never took over: %+v", b.Stats())
	}
}

func TestMalformedEventsAreSkipped(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	p, _ := e.start(t, rec, "a")
	e.waitSession(t)
	e.vk.QueueEvents(group,
		json.RawMessage(`{"type":"message_new","event_id":"bad","group_id":77,"object":{"message":{"peer_id":0}}}`),
		json.RawMessage(`{"type":"message_new","event_id":"other","group_id":78,"object":{"message":{"peer_id":1}}}`),
		json.RawMessage(`{"no":"type"}`),
		json.RawMessage(`{"type":"group_join","event_id":"j","group_id":77,"object":{}}`),
		message(0))
	wantEach(t, rec.wait(t, 1), 0, 1)
	if s := p.Stats(); s.Skipped != 3 || s.Events != 5 {
		t.Errorf("stats %+v: want 3 skipped of 5 events", s)
	}
}

func TestVKOutageLosesNothing(t *testing.T) {
	for _, o := range []vktest.Outage{vktest.Unreachable, vktest.BadGateway, vktest.Hang} {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			e := newEnv(t)
			e.vk.SetLongPollBatch(2)
			rec := newRecorder()
			p, _ := e.start(t, rec, "a")
			e.waitSession(t)
			e.vk.SetOutage(o)
			queue(e.vk, 0, 6) // the request waiting already gets the first two
			if o == vktest.Hang {
				eventually.True(t, 5*time.Second, "a poll held by the hang", func() bool { return e.vk.Hanging() > 0 })
			} else {
				eventually.True(t, 5*time.Second, "a retry during the outage", func() bool { return p.Stats().Retries > 0 })
			}
			queue(e.vk, 6, 8)
			e.vk.SetOutage(vktest.Up)
			wantEach(t, rec.wait(t, 8), 0, 8)
		})
	}
}

func TestWorkersKeepTheOrderOfEachKey(t *testing.T) {
	e := newEnv(t)
	e.vk.SetLongPollBatch(50)
	rec := newRecorder()
	key := func(m callback.Message) string { return strconv.Itoa(m.ConversationMessageID % 3) }
	e.startWith(t, rec, longpoll.Options{Owner: "a", Workers: 4, Key: key})
	e.waitSession(t)
	queue(e.vk, 0, 60)
	got := rec.wait(t, 60)
	last := map[int]int{} // key → the last event number handled
	for _, id := range got {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "e"))
		if prev, ok := last[n%3]; ok && n < prev {
			t.Fatalf("key %d: e%d handled after e%d: %v", n%3, n, prev, got)
		}
		last[n%3] = n
	}
	if len(got) != 60 {
		t.Fatalf("handled %d, want 60", len(got))
	}
}

// TestLeaseLostOnSaveEndsTheSession: a poller whose lease another instance
// took over (it stalled past the lease, say) learns it when it saves the
// ts of its next batch, and stands by at once instead of polling on.
func TestLeaseLostOnSaveEndsTheSession(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	// A long lease: its renewal (every 20 s) is not what ends the session.
	a, _ := e.startWith(t, rec, longpoll.Options{Owner: "a", LeaseTTL: time.Minute})
	ctx := context.Background()
	eventually.True(t, 5*time.Second, "the first ts saved", func() bool { ts, _ := e.store.TS(ctx, group); return ts != "" })
	first, _ := e.store.TS(ctx, group)

	e.mr.FastForward(time.Minute) // a's lease runs out…
	if held, err := e.store.Hold(ctx, group, "b", time.Minute); err != nil || !held {
		t.Fatalf("b takes the lease: %v, %v", held, err)
	}
	queue(e.vk, 0, 2) // …while a still polls: it handles the batch, then cannot save its ts
	wantEach(t, rec.wait(t, 2), 0, 2)
	eventually.True(t, 5*time.Second, "a standing by", func() bool { return !a.Stats().Polling })
	if ts, _ := e.store.TS(ctx, group); ts != first {
		t.Errorf("ts %q saved without the lease, want %q kept", ts, first)
	}
	if s := a.Stats(); s.Sessions != 1 {
		t.Errorf("a took the lease again: %+v", s)
	}
}

// signalStore reports each Hold as it begins.
type signalStore struct {
	*longpoll.RedisStore
	holds chan struct{}
}

func (s signalStore) Hold(ctx context.Context, g int, owner string, ttl time.Duration) (bool, error) {
	select {
	case s.holds <- struct{}{}:
	default:
	}
	return s.RedisStore.Hold(ctx, g, owner, ttl)
}

// TestCloseWhileRedisStalls: a lease renewal waiting on a stalled Redis
// (whose client waits a minute for an answer) holds Close no longer than
// Close's context, and the pollers stop on their own soon after, handing
// the handler nothing more.
func TestCloseWhileRedisStalls(t *testing.T) {
	mr := miniredis.RunT(t)
	proxy := redistest.NewProxy(t, mr.Addr())
	rdb, err := redisconn.Open(redisconn.Config{Addr: proxy.Addr(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	rec := newRecorder()
	holds := make(chan struct{}, 1)
	opts := longpoll.Options{GroupID: group, Handler: rec, Store: signalStore{newStore(t, rdb), holds},
		Owner: "a", LeaseTTL: 300 * time.Millisecond}
	testOptions(&opts, vk)
	g, err := longpoll.Start([]longpoll.Options{opts})
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, vk)
	proxy.Stall()
	select { // drop a Hold that began before the stall
	case <-holds:
	default:
	}
	select { // a renewal is now waiting on the stalled Redis
	case <-holds:
	case <-time.After(5 * time.Second):
		t.Fatal("no lease renewal")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := g.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v past its 100ms context", took)
	}
	queue(vk, 0, 3)
	// The renewal and the release each give up after a few seconds.
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start = time.Now()
	if err := g.Close(ctx); err != nil {
		t.Fatalf("pollers not stopped after %v: %v", time.Since(start), err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.handled) != 0 {
		t.Errorf("messages handled after Close: %v", rec.handled)
	}
}
