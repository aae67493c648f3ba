package bot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/outbox"
	"github.com/vkcounter/vkcounter/vktest"
)

// fakeActivity records the calls the bot makes; fail makes them fail.
type fakeActivity struct {
	mu    sync.Mutex
	calls []string // "hit name" or "visit name key timeout"
	// live records, per call, whether its context was still live.
	live []bool
	fail error
}

func (a *fakeActivity) record(ctx context.Context, call string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, call)
	_, hasDeadline := ctx.Deadline()
	a.live = append(a.live, ctx.Err() == nil && hasDeadline)
	return a.fail
}

func (a *fakeActivity) Hit(ctx context.Context, name string) (int64, error) {
	return 1, a.record(ctx, "hit "+name)
}

func (a *fakeActivity) Visit(ctx context.Context, name, key string, timeout time.Duration) (int, bool, error) {
	return 1, true, a.record(ctx, fmt.Sprintf("visit %s %s %v", name, key, timeout))
}

func (a *fakeActivity) snapshot() ([]string, []bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls), slices.Clone(a.live)
}

var _ bot.Activity = (*fakeActivity)(nil)

func newActivityBot(t *testing.T, c bot.Counter, a bot.Activity) (*bot.Bot, *vktest.Server) {
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
	b, vk := newActivityBot(t, newMemCounter(), a)
	m1 := msg(1, "hello")
	retry := m1
	retry.Retry = 1
	m2 := msg(2, "hello")
	m2.FromID = m1.FromID // the same user writes again
	for _, m := range []callback.Message{m1, retry, m2} {
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitSends(t, vk, 3)
	calls, live := a.snapshot()
	want := []string{"hit vk.messages", "visit vk.users 101 5m0s", "hit vk.messages", "visit vk.users 101 5m0s"}
	if !slices.Equal(calls, want) {
		t.Fatalf("activity calls %q, want %q: the retried event must not be fed", calls, want)
	}
	if slices.Contains(live, false) {
		t.Fatalf("activity called with a dead or unbounded context: %v", live)
	}
	if st := b.Stats(); st.Received != 3 || st.Duplicates != 1 || st.ActivityErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestActivityFailureDoesNotFailTheMessage(t *testing.T) {
	a := &fakeActivity{fail: errors.New("redis: connection refused")}
	b, vk := newActivityBot(t, newMemCounter(), a)
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatalf("HandleMessage = %v, want nil: an activity failure must not make VK re-deliver", err)
	}
	if s := waitSends(t, vk, 1); s[0].Message != "0" {
		t.Fatalf("reply %+v", s[0])
	}
	if calls, _ := a.snapshot(); len(calls) != 2 {
		t.Fatalf("calls %q: a failed hit must not skip the visit", calls)
	}
	if st := b.Stats(); st.ActivityErrors != 2 {
		t.Fatalf("ActivityErrors = %d, want 2", st.ActivityErrors)
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

func TestActivityWithoutSenderOnlyHits(t *testing.T) {
	a := &fakeActivity{}
	b, vk := newActivityBot(t, newMemCounter(), a)
	m := msg(1, "x")
	m.FromID = 0
	if err := b.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitSends(t, vk, 1)
	if calls, _ := a.snapshot(); !slices.Equal(calls, []string{"hit vk.messages"}) {
		t.Fatalf("calls %q", calls)
	}
}

// failingOutbox fails Add while fail is set.
type failingOutbox struct {
	bot.Outbox
	mu   sync.Mutex
	fail bool
}

func (o *failingOutbox) Add(ctx context.Context, r bot.Reply) error {
	o.mu.Lock()
	fail := o.fail
	o.mu.Unlock()
	if fail {
		return errors.New("outbox unavailable")
	}
	return o.Outbox.Add(ctx, r)
}

// TestActivityOnceWhenTheReplyIsStoredOnRetry: the first delivery is
// counted but its reply cannot be stored, so VK re-delivers it; the
// activity is fed by the first delivery only, even when its request was
// cancelled.
func TestActivityOnceWhenTheReplyIsStoredOnRetry(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	a := &fakeActivity{}
	o := &failingOutbox{Outbox: newOutbox(t, outbox.Options{}), fail: true}
	opts := fastOptions()
	opts.Activity = a
	b, err := bot.New(newMemCounter(), o, []bot.Group{{ID: 7, Senders: []bot.Sender{
		bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	m := msg(1, "x")
	if err := b.HandleMessage(cancelled, m); err == nil {
		t.Fatal("HandleMessage succeeded although the reply was not stored")
	}
	o.mu.Lock()
	o.fail = false
	o.mu.Unlock()
	m.Retry = 1
	if err := b.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitSends(t, vk, 1)
	calls, live := a.snapshot()
	if len(calls) != 2 || slices.Contains(live, false) {
		t.Fatalf("activity calls %q (live %v), want one hit and one visit with a live context", calls, live)
	}
}
