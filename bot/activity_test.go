package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

// fakeActivity records the calls the bot makes; the next fails calls fail.
type fakeActivity struct {
	mu    sync.Mutex
	calls []string // "add name n" or "visit name key,key timeout"
	// live records, per call, whether its context was still live.
	live    []bool
	batches []string // the batch of each AddOnce call
	fails   int
	// uniqueFails is how many AddUnique calls fail next.
	uniqueFails int
	// uniques are the unique counters' keys, by counter: an estimate is
	// the exact count.
	uniques map[string]map[string]bool
	// gate, when not nil, holds every call until it is closed (set before
	// the bot starts).
	gate chan struct{}
}

func (a *fakeActivity) record(ctx context.Context, call string) error {
	if a.gate != nil {
		<-a.gate
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call)
	_, hasDeadline := ctx.Deadline()
	a.live = append(a.live, ctx.Err() == nil && hasDeadline)
	if a.fails > 0 {
		a.fails--
		return errors.New("redis: connection refused")
	}
	return nil
}

func (a *fakeActivity) AddOnce(ctx context.Context, name string, n int64, batch string) (int64, error) {
	a.mu.Lock()
	a.batches = append(a.batches, batch)
	a.mu.Unlock()
	return n, a.record(ctx, fmt.Sprintf("add %s %d", name, n))
}

func (a *fakeActivity) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (int, int, error) {
	return len(keys), len(keys), a.record(ctx, fmt.Sprintf("visit %s %s %v", name, strings.Join(keys, ","), timeout))
}

func (a *fakeActivity) AddUnique(ctx context.Context, name string, keys []string) (int64, error) {
	err := a.record(ctx, fmt.Sprintf("unique %s %s", name, strings.Join(keys, ",")))
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil && a.uniqueFails > 0 {
		a.uniqueFails--
		err = errors.New("redis: i/o timeout")
	}
	if err != nil {
		return 0, err
	}
	if a.uniques == nil {
		a.uniques = map[string]map[string]bool{}
	}
	if a.uniques[name] == nil {
		a.uniques[name] = map[string]bool{}
	}
	for _, k := range keys {
		a.uniques[name][k] = true
	}
	return int64(len(a.uniques[name])), nil
}

// lose forgets the unique counters' keys, as a Redis that lost its data.
func (a *fakeActivity) lose() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.uniques = nil
}

func (a *fakeActivity) snapshot() ([]string, []bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls), slices.Clone(a.live)
}

var _ bot.Activity = (*fakeActivity)(nil)

func newActivityBot(t *testing.T, c outbox.Counter, a bot.Activity) (*bot.Bot, *vktest.Server) {
	t.Helper()
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	opts := fastOptions()
	opts.Activity = a
	b, _ := newBotOutbox(t, c, vk, opts, "tok")
	return b, vk
}

func TestActivityFedOncePerCountedMessage(t *testing.T) {
	a := &fakeActivity{}
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	opts := fastOptions()
	opts.Activity = a
	opts.ActivityFlush = time.Hour // one batch, written by Close, however slow the machine
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	m1 := msg(1, "hello")
	retry := m1
	m2 := msg(2, "hello")
	m2.FromID = m1.FromID // the same user writes again
	m3 := msg(3, "other")
	for _, m := range []callback.Message{m1, retry, m2, m3} {
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitSends(t, vk, 3)           // one reply per message: the retried event is not answered twice
	b.Close(context.Background()) // writes the last batch
	calls, live := a.snapshot()
	want := []string{"add vk.messages 3", "visit vk.users 101,103 5m0s", "unique " + bot.UsersDay(time.Now()) + " 101,103"}
	if !slices.Equal(calls, want) {
		t.Fatalf("activity calls %q, want %q: one batch; the retried event not fed, each sender once", calls, want)
	}
	if slices.Contains(live, false) {
		t.Fatalf("activity called with a dead or unbounded context: %v", live)
	}
	if st := b.Stats(); st.Received != 4 || st.Duplicates != 1 || st.ActivityErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestActivitySendersAddedOnce: a sender is added to the day's unique
// counter once, not with each of its messages, and a flush with no sender
// to add does not read the estimate again within a minute (addedSenders
// .due: TestAddedSendersDue); an estimate below the senders added tells
// that the counter lost them, and they are added again.
func TestActivitySendersAddedOnce(t *testing.T) {
	a := &fakeActivity{}
	b, vk := newActivityBot(t, newMemCounter(), a)
	day := bot.UsersDay(time.Now())
	id := 1
	// send posts a message from from and waits for its flush: the hit,
	// the visit and, when unique, the unique counter's call.
	send := func(from int, unique bool) {
		t.Helper()
		before, _ := a.snapshot()
		m := msg(id, fmt.Sprint("text ", id))
		m.FromID = from
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		waitSends(t, vk, id)
		id++
		last, n := "visit ", 2
		if unique {
			last, n = "unique ", 3
		}
		eventually.True(t, 5*time.Second, "the message's activity written", func() bool {
			calls, _ := a.snapshot()
			return len(calls) >= len(before)+n && strings.HasPrefix(calls[len(calls)-1], last)
		})
	}
	send(101, true)  // the first flush: 101 added
	send(101, false) // the same sender again: nothing added, the estimate not read again
	send(102, true)  // a new sender: added
	a.lose()
	send(103, true) // a new sender: the estimate (1 of 3 added) shows the loss
	send(101, true) // after the loss was seen: 101 added again
	calls, _ := a.snapshot()
	var uniques []string
	for _, c := range calls {
		if strings.HasPrefix(c, "unique ") {
			uniques = append(uniques, c)
		}
	}
	want := []string{"unique " + day + " 101", "unique " + day + " 102", "unique " + day + " 103", "unique " + day + " 101"}
	if !slices.Equal(uniques, want) {
		t.Fatalf("unique counter calls %q, want %q", uniques, want)
	}
	if today := b.ActivityReport().Users.Today; today.Estimate != 2 {
		t.Fatalf("today's estimate %d, want 2", today.Estimate)
	}
}

// TestActivityUniqueFailureIsRetried: when the day's unique counter fails,
// the senders are put back, visited again (idempotent) and added again.
func TestActivityUniqueFailureIsRetried(t *testing.T) {
	a := &fakeActivity{uniqueFails: 1}
	b, vk := newActivityBot(t, newMemCounter(), a)
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatal(err)
	}
	waitSends(t, vk, 1)
	day := bot.UsersDay(time.Now())
	want := []string{"add vk.messages 1", "visit vk.users 101 5m0s", "unique " + day + " 101", "visit vk.users 101 5m0s", "unique " + day + " 101"}
	eventually.True(t, 5*time.Second, "the failed unique add retried", func() bool {
		calls, _ := a.snapshot()
		return len(calls) >= len(want)
	})
	if calls, _ := a.snapshot(); !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	if today := b.ActivityReport().Users.Today; today.Counter != day || today.Estimate != 1 || today.Age < 0 {
		t.Fatalf("ActivityReport today %+v, want today's estimate 1, read", today)
	}
	if st := b.Stats(); st.ActivityErrors != 1 {
		t.Fatalf("ActivityErrors = %d, want 1", st.ActivityErrors)
	}
}

// TestActivityFailureIsRetriedNotLost: the counters fail twice; the
// message is answered anyway, and the failed batch is written later.
func TestActivityFailureIsRetriedNotLost(t *testing.T) {
	a := &fakeActivity{fails: 2}
	b, vk := newActivityBot(t, newMemCounter(), a)
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatalf("HandleMessage = %v, want nil: an activity failure must not make VK re-deliver", err)
	}
	if s := waitSends(t, vk, 1); s[0].Message != "0" {
		t.Fatalf("reply %+v", s[0])
	}
	eventually.True(t, 5*time.Second, "the failed batch retried", func() bool {
		calls, _ := a.snapshot()
		return len(calls) >= 4
	})
	want := []string{"add vk.messages 1", "visit vk.users 101 5m0s", "add vk.messages 1", "visit vk.users 101 5m0s"}
	if calls, _ := a.snapshot(); !slices.Equal(calls[:4], want) {
		t.Fatalf("calls %q, want both failed writes retried once: %q", calls, want)
	}
	if st := b.Stats(); st.ActivityErrors != 2 {
		t.Fatalf("ActivityErrors = %d, want 2", st.ActivityErrors)
	}
}

// TestActivityBatchesABurst: 300 messages from 30 senders cost the
// counters a few calls, and every message and sender is in them. The
// counters hold their first call until the burst is in, so the batching
// does not depend on how fast a loaded machine runs the loop.
func TestActivityBatchesABurst(t *testing.T) {
	a := &fakeActivity{gate: make(chan struct{})}
	b, vk := newActivityBot(t, newMemCounter(), a)
	for i := range 300 {
		m := msg(i, "burst")
		m.FromID = 1 + i%30
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitSends(t, vk, 300)
	close(a.gate)
	b.Close(context.Background())
	calls, _ := a.snapshot()
	var hits int
	users := map[string]bool{}
	for _, c := range calls {
		var n int
		if _, err := fmt.Sscanf(c, "add vk.messages %d", &n); err == nil {
			hits += n
			continue
		}
		f := strings.Fields(c)
		if len(f) < 3 {
			continue // the estimate read, no sender added
		}
		for _, u := range strings.Split(f[2], ",") {
			users[u] = true
		}
	}
	if hits != 300 || len(users) != 30 || len(calls) > 10 {
		t.Fatalf("%d calls adding %d messages and %d senders; want 300 and 30 in a few batches", len(calls), hits, len(users))
	}
}

func TestActivityNotFedWhenCountFails(t *testing.T) {
	c := newMemCounter()
	c.fail = errors.New("redis down")
	a := &fakeActivity{}
	b, _ := newActivityBot(t, c, a)
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err == nil {
		t.Fatal("HandleMessage succeeded with a failing counter")
	}
	if calls, _ := a.snapshot(); len(calls) != 0 {
		t.Fatalf("activity fed for a message not counted: %q", calls)
	}
}

// TestNotFromAPersonNotCounted: messages of another community (a bot in a
// chat), without an author, outgoing, or chat service messages are
// acknowledged and neither counted, answered nor fed to the activity
// counters; a message with a keyboard payload is a person's.
func TestNotFromAPersonNotCounted(t *testing.T) {
	a := &fakeActivity{}
	c := newMemCounter()
	b, vk := newActivityBot(t, c, a)
	bot2 := msg(1, "x")
	bot2.FromID = -12345
	anon := msg(2, "x")
	anon.FromID = 0
	out := msg(3, "x")
	out.Out = true
	invite := msg(4, "")
	invite.Action = "chat_invite_user"
	for _, m := range []callback.Message{bot2, anon, out, invite} {
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
	}
	person := msg(5, "x") // a keyboard button press: counted by its text
	if err := b.HandleMessage(context.Background(), person); err != nil {
		t.Fatal(err)
	}
	if sends := waitSends(t, vk, 1); sends[0].PeerID != person.PeerID || sends[0].Message != "0" {
		t.Fatalf("sends %+v, want one reply 0 to the person", sends)
	}
	b.Close(context.Background())
	if got := len(vk.Sends()); got != 1 {
		t.Errorf("%d replies, want only the person's", got)
	}
	if calls, _ := a.snapshot(); !slices.Equal(calls, []string{"add vk.messages 1", "visit vk.users 105 5m0s", "unique " + bot.UsersDay(time.Now()) + " 105"}) {
		t.Errorf("activity calls %q, want the person's message only", calls)
	}
	if st := b.Stats(); st.Ignored != 4 || st.Received != 1 {
		t.Errorf("stats %+v, want 4 ignored and 1 counted", st)
	}
	for _, m := range []callback.Message{bot2, anon, out, invite, person} {
		if err := bot.Answered(m); (err == nil) != (m.FromID == person.FromID) {
			t.Errorf("Answered(%+v) = %v", m, err)
		}
	}
}

// breakingCounter counts, then, while fail is set, makes its Redis (the
// outbox's) fail every command: the message is counted and its reply
// cannot be stored.
type breakingCounter struct {
	*memCounter
	redis *redistest.Target
	mu    sync.Mutex
	fail  bool
}

func (c *breakingCounter) Count(ctx context.Context, identity, dedupe string) (int64, bool, error) {
	previous, duplicate, err := c.memCounter.Count(ctx, identity, dedupe)
	c.mu.Lock()
	if c.fail {
		c.redis.Mini.SetError("outbox unavailable")
	}
	c.mu.Unlock()
	return previous, duplicate, err
}

// mend makes the Redis answer again.
func (c *breakingCounter) mend() {
	c.mu.Lock()
	c.fail = false
	c.redis.Mini.SetError("")
	c.mu.Unlock()
}

// TestActivityOnceWhenTheReplyIsStoredOnRetry: the first delivery is
// counted but its reply cannot be stored, so VK re-delivers it; the
// activity is fed by the first delivery only, even when its request was
// cancelled.
func TestActivityOnceWhenTheReplyIsStoredOnRetry(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	a := &fakeActivity{}
	tg := redistest.Open(t, redistest.Mini)
	c := &breakingCounter{memCounter: newMemCounter(), redis: tg, fail: true}
	o := newOutboxOn(t, tg, outbox.Options{Counter: c})
	opts := fastOptions()
	opts.Activity = a
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{
		bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: a test's deferred vk.Close runs before this, and a sender
		// retrying a VK that is gone would keep an unbounded drain waiting.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	m := msg(1, "x")
	if err := b.HandleMessage(cancelled, m); err == nil {
		t.Fatal("HandleMessage succeeded although the reply was not stored")
	}
	c.mend()
	if err := b.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitSends(t, vk, 1)
	b.Close(context.Background())
	calls, live := a.snapshot()
	if !slices.Equal(calls, []string{"add vk.messages 1", "visit vk.users 101 5m0s", "unique " + bot.UsersDay(time.Now()) + " 101"}) || slices.Contains(live, false) {
		t.Fatalf("activity calls %q (live %v), want one message and one visit with a live context", calls, live)
	}
}

// TestActivityFailureLogRateLimited: while the counters keep failing, the
// batch is retried at every flush, but the failure is logged once per
// period, not once per retry.
func TestActivityFailureLogRateLimited(t *testing.T) {
	a := &fakeActivity{fails: 1 << 30}
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	var log bytes.Buffer
	opts := fastOptions()
	opts.Activity = a
	opts.ActivityFlush = 5 * time.Millisecond
	opts.Logger = zerolog.New(zerolog.SyncWriter(&log))
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "20 failed activity writes", func() bool { return b.Stats().ActivityErrors >= 20 })
	b.Close(context.Background()) // no more writes to log
	if n := strings.Count(log.String(), "activity counter not updated"); n != 1 {
		t.Fatalf("%d failure lines for %d failures within seconds, want 1:\n%s", n, b.Stats().ActivityErrors, log.String())
	}
}

// The report's JSON keys are the counters' names, as /stats documents them.
func TestActivityReportKeys(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	o := newOutbox(t, outbox.Options{Counter: newMemCounter()})
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{
		bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL()})}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	raw, err := json.Marshal(b.ActivityReport())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[bot.MessagesCounter] == nil || got[bot.UsersCounter] == nil {
		t.Fatalf("report %s, want keys %q and %q", raw, bot.MessagesCounter, bot.UsersCounter)
	}
	if got[bot.MessagesCounter]["age_seconds"] != -1.0 {
		t.Fatalf("report %s: a counter not written yet must have age_seconds -1", raw)
	}
}
