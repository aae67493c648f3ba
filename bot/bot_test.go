package bot_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

// memCounter is an outbox.Counter without a window: it counts per identity and
// dedupes event ids, as freq.Store does.
type memCounter struct {
	mu     sync.Mutex
	counts map[string]int64
	events map[string]int64
	fail   error
}

func newMemCounter() *memCounter {
	return &memCounter{counts: map[string]int64{}, events: map[string]int64{}}
}

func (c *memCounter) Count(_ context.Context, identity, eventID string) (previous int64, duplicate bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return 0, false, c.fail
	}
	if n, ok := c.events[eventID]; ok && eventID != "" {
		return n, true, nil
	}
	n := c.counts[identity]
	c.counts[identity]++
	if eventID != "" {
		c.events[eventID] = n
	}
	return n, false, nil
}

// fastOptions make retries quick so tests do not wait on real backoffs.
func fastOptions() bot.Options {
	return bot.Options{RatePerToken: 1000, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, Poll: 20 * time.Millisecond,
		FloodPause: 5 * time.Millisecond, HaltPause: 5 * time.Millisecond, Logger: zerolog.Nop()}
}

// newOutbox returns an outbox on a fresh miniredis; opts.Counter counts
// the messages it records.
func newOutbox(t *testing.T, opts outbox.Options) *outbox.Outbox {
	t.Helper()
	return newOutboxOn(t, redistest.Open(t, redistest.Mini), opts)
}

// newOutboxOn returns an outbox on tg.
func newOutboxOn(t *testing.T, tg *redistest.Target, opts outbox.Options) *outbox.Outbox {
	t.Helper()
	o := outbox.New(tg.Client, opts)
	t.Cleanup(func() { o.Close() }) // after the bot's Close, registered later
	if err := o.Init(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	return o
}

func newBot(t *testing.T, c outbox.Counter, vk *vktest.Server, tokens ...string) *bot.Bot {
	t.Helper()
	b, _ := newBotOutbox(t, c, vk, fastOptions(), tokens...)
	return b
}

func newBotOutbox(t *testing.T, c outbox.Counter, vk *vktest.Server, opts bot.Options, tokens ...string) (*bot.Bot, *outbox.Outbox) {
	t.Helper()
	o := newOutbox(t, outbox.Options{Counter: c, Clock: opts.Clock}) // the bot's clock, as the service gives both
	return newBotOn(t, o, o, vk, opts, tokens...), o
}

// newBotOn returns a bot of community 7 recording with rec and sending
// from ob through vk, one sender per token, closed at the test's end.
func newBotOn(t *testing.T, rec bot.Recorder, ob bot.Outbox, vk *vktest.Server, opts bot.Options, tokens ...string) *bot.Bot {
	t.Helper()
	g := bot.Group{ID: 7}
	for _, tok := range tokens {
		g.Senders = append(g.Senders, bot.NewVKSender(tok, bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second}))
	}
	b, err := bot.New(rec, ob, []bot.Group{g}, opts)
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
	return b
}

func msg(i int, text string) callback.Message {
	return callback.Message{GroupID: 7, EventID: fmt.Sprintf("ev%d", i), PeerID: 100 + i, FromID: 100 + i,
		ConversationMessageID: i + 1, Text: text}
}

func waitSends(t *testing.T, vk *vktest.Server, n int) []vktest.Send {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := vk.WaitSends(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRepliesCarryTheCountToThePeer(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	b := newBot(t, newMemCounter(), vk, "tok")
	for i := range 3 {
		if err := b.HandleMessage(context.Background(), msg(i, "hello")); err != nil {
			t.Fatal(err)
		}
	}
	sends := waitSends(t, vk, 3)
	sort.Slice(sends, func(i, j int) bool { return sends[i].PeerID < sends[j].PeerID })
	ids := map[int64]bool{}
	for i, s := range sends {
		m := msg(i, "hello")
		if s.PeerID != m.PeerID || s.Message != fmt.Sprint(i) || s.RandomID == 0 || ids[s.RandomID] || s.Token != "tok" {
			t.Errorf("send %d = %+v, want peer %d message %d with a random_id of its own, not 0", i, s, m.PeerID, i)
		}
		ids[s.RandomID] = true
	}
}

func TestRetriedEventAnsweredOnce(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	b := newBot(t, newMemCounter(), vk, "tok")
	m := msg(1, "again")
	retry := m
	for _, x := range []callback.Message{m, retry} {
		if err := b.HandleMessage(context.Background(), x); err != nil {
			t.Fatal(err)
		}
	}
	sends := waitSends(t, vk, 1)
	b.Close(context.Background())
	if all := vk.Sends(); len(all) != 1 || sends[0].Message != "0" || sends[0].RandomID == 0 {
		t.Fatalf("sends %+v, want one reply 0 with a random_id", all)
	}
	if st := b.Stats(); st.Received != 2 || st.Duplicates != 1 {
		t.Errorf("stats %+v, want 2 received, 1 duplicate", st)
	}
}

func TestVKErrorClasses(t *testing.T) {
	tests := []struct {
		name      string
		codes     []int // injected before the call succeeds
		wantSent  int64
		wantDrop  int64
		wantCalls int
	}{
		{"too many requests (6) is retried", []int{6, 6}, 1, 0, 3},
		{"internal error (10) is retried", []int{10}, 1, 0, 2},
		{"unknown error (1) is retried", []int{1}, 1, 0, 2},
		{"peer refuses messages (901) is dropped", []int{901}, 0, 1, 1},
		{"user blocked (900) is dropped", []int{900}, 0, 1, 1},
		{"flood control (9) is tried again after a pause", []int{9}, 1, 0, 2},
		{"flood control twice: a longer pause, then delivered", []int{9, 9}, 1, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vk := vktest.NewServer()
			defer vk.Close()
			vk.FailNext(tc.codes...)
			b := newBot(t, newMemCounter(), vk, "tok")
			if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := b.Stats()
			if st.Sent != tc.wantSent || st.Dropped != tc.wantDrop || vk.Calls("messages.send") != tc.wantCalls {
				t.Errorf("sent %d dropped %d calls %d; want %d %d %d", st.Sent, st.Dropped, vk.Calls("messages.send"), tc.wantSent, tc.wantDrop, tc.wantCalls)
			}
		})
	}
}

func TestRejectedTokenMakesBotNotReadyUntilItWorks(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.FailAlways(5)
	b := newBot(t, newMemCounter(), vk, "tok")
	if err := b.Ready(); err != nil {
		t.Fatalf("ready before any call: %v", err)
	}
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "error 5 makes the bot not ready", func() bool { return b.Ready() != nil })
	if code, _ := bot.VKErrorCode(b.Ready()); code != 5 {
		t.Errorf("Ready() = %v, want VK error 5", b.Ready())
	}
	vk.FailAlways(0) // the operator fixed the token: the held reply goes out
	waitSends(t, vk, 1)
	eventually.NoError(t, 5*time.Second, "ready after a successful send", b.Ready)
}

func TestTokensShareTheLoad(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.SetDelay(5 * time.Millisecond)
	b := newBot(t, newMemCounter(), vk, "a", "b", "c")
	for i := range 30 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	per := map[string]int{}
	for _, s := range waitSends(t, vk, 30) {
		per[s.Token]++
	}
	if len(per) != 3 {
		t.Errorf("sends per token %v, want all three tokens used", per)
	}
}

func TestCountFailureIsReturnedAndNothingQueued(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	c := newMemCounter()
	c.fail = errors.New("redis down")
	b := newBot(t, c, vk, "tok")
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err == nil {
		t.Fatal("HandleMessage succeeded while the counter fails")
	}
	b.Close(context.Background())
	if n := vk.Calls("messages.send"); n != 0 || b.Stats().Received != 0 {
		t.Errorf("%d sends, stats %+v after a failed count", n, b.Stats())
	}
}

func TestCloseDrainsQueue(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.SetDelay(time.Millisecond)
	b := newBot(t, newMemCounter(), vk, "tok")
	for i := range 50 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(vk.Sends()); got != 50 {
		t.Errorf("%d replies sent before Close returned, want 50", got)
	}
	if err := b.HandleMessage(context.Background(), msg(99, "x")); !errors.Is(err, bot.ErrClosed) {
		t.Errorf("HandleMessage after Close = %v, want ErrClosed", err)
	}
}

func TestCloseDeadlineLeavesRepliesInOutbox(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.FailAlways(10) // VK keeps failing: nothing can be delivered
	b, o := newBotOutbox(t, newMemCounter(), vk, fastOptions(), "tok")
	for i := range 5 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, bot.ErrNotDrained) {
		t.Fatalf("Close = %v, want ErrNotDrained: nothing could be sent", err)
	}
	n, err := o.Len(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 || b.Stats().Sent != 0 {
		t.Errorf("outbox holds %d replies, bot stats %+v; want all 5 kept for the next start", n, b.Stats())
	}
}

func TestOutboxFull(t *testing.T) {
	block := make(chan struct{})
	sender := bot.SenderFunc(func(ctx context.Context, rs []bot.Reply) []error {
		<-block
		return make([]error, len(rs))
	})
	o := newOutbox(t, outbox.Options{MaxLen: 2, Counter: newMemCounter()})
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{sender}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	var full error
	for i := range 10 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			full = err
			break
		}
	}
	close(block)
	b.Close(context.Background())
	if !errors.Is(full, outbox.ErrFull) {
		t.Fatalf("got %v, want outbox.ErrFull once 2 replies wait", full)
	}
}

// TestBacklogIsBatched checks that waiting replies go out 25 per execute
// call and that each sub-call's error is classified on its own.
func TestBacklogIsBatched(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	opts := fastOptions()
	opts.RatePerToken = 5 // slow enough for a backlog to build
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	vk.FailNext(0, 901, 10) // in the first call: 2nd reply refused for good, 3rd retried
	for i := range 100 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(vk.Messages()); got != 99 {
		t.Errorf("%d messages delivered, want 99 (one refused with 901)", got)
	}
	if st := b.Stats(); st.Sent != 99 || st.Dropped != 1 || st.Retried != 1 {
		t.Errorf("stats %+v, want 99 sent, 1 dropped, 1 retried", st)
	}
	if vk.Calls("execute") == 0 || vk.Calls("execute")+vk.Calls("messages.send") > 10 {
		t.Errorf("%d execute and %d messages.send calls for 100 replies; want batches of up to 25",
			vk.Calls("execute"), vk.Calls("messages.send"))
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want bot.Class
	}{
		{nil, bot.Delivered},
		{&api.Error{Code: 6}, bot.Paced},
		{&api.Error{Code: 14}, bot.Captcha},
		{&api.Error{Code: 15}, bot.Drop},
		{&api.Error{Code: 932}, bot.Drop},
		{&api.Error{Code: 10}, bot.Retry},
		{&api.Error{Code: 9}, bot.Flood},
		{&api.Error{Code: 5}, bot.Halt},
		{&api.Error{Code: 29}, bot.Halt},
		{&api.Error{Code: 912}, bot.Drop},
		{&api.Error{Code: 945}, bot.Drop},
		{&api.Error{Code: 100}, bot.Drop},
		{api.Error{Code: 7}, bot.Permission},
		{&api.Error{Code: 36}, bot.Retry},
		{&api.Error{Code: 13}, bot.Retry},
		{&api.Error{Code: 27}, bot.Halt},
		{&api.Error{Code: 921}, bot.Drop},
		{&api.Error{Code: 4242}, bot.Unknown},
		{fmt.Errorf("wrapped: %w", &api.Error{Code: 901}), bot.Drop},
		{&api.InvalidContentType{ContentType: "text/html"}, bot.Retry},
		{errors.New("connection reset"), bot.Retry},
	}
	for _, tc := range tests {
		if got := bot.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
