package bot_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

// startBot starts a bot serving community 7 on tg, under prefix, whose
// outbox names this instance consumer; Close runs when the test ends.
func startBot(t *testing.T, tg *redistest.Target, prefix, consumer string, c outbox.Counter, opts bot.Options, senders ...bot.Sender) (*bot.Bot, *outbox.Outbox) {
	t.Helper()
	return startBotHooked(t, tg, prefix, consumer, c, nil, opts, senders...)
}

// startBotHooked is startBot with hook, when not nil, added to the
// outbox's connections for reads that wait (outbox.AddHook) before the
// bot starts.
func startBotHooked(t *testing.T, tg *redistest.Target, prefix, consumer string, c outbox.Counter, hook redis.Hook, opts bot.Options, senders ...bot.Sender) (*bot.Bot, *outbox.Outbox) {
	t.Helper()
	o := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: consumer, Counter: c})
	t.Cleanup(func() { o.Close() })
	if hook != nil {
		o.AddHook(hook)
	}
	if err := o.Init(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: senders}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	return b, o
}

func vkSenders(vk *vktest.Server, tokens ...string) []bot.Sender {
	var out []bot.Sender
	for _, tok := range tokens {
		out = append(out, bot.NewVKSender(tok, bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second}))
	}
	return out
}

// pendingUnder returns how many entries of community 7 are pending under consumer.
func pendingUnder(t *testing.T, tg *redistest.Target, prefix, consumer string) int {
	t.Helper()
	p, err := tg.Client.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: prefix + "o:{7}", Group: outbox.ConsumerGroup,
		Start: "-", End: "+", Count: 1000, Consumer: consumer}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(p)
}

// waitingReads counts the reads that wait under way on the connections an
// outbox opens of its own for them (outbox.AddHook): a command is counted
// from when it is sent until its answer.
type waitingReads struct{ n atomic.Int64 }

func (w *waitingReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (w *waitingReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.n.Add(1)
		defer w.n.Add(-1)
		return next(ctx, cmd)
	}
}
func (w *waitingReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// heldCounter is an outbox.Counter that answers only once release is closed.
type heldCounter struct {
	outbox.Counter
	release chan struct{}
}

func (h heldCounter) Count(ctx context.Context, identity, dedupe string) (int64, bool, error) {
	<-h.release
	return h.Counter.Count(ctx, identity, dedupe)
}

// TestCloseSendsReplyRecordedDuringClose: a webhook gave up while Redis was
// slow, and its message is still being counted when shutdown begins. Close
// waits for it and sends its reply before the senders stop: nothing is
// left in the outbox, and Close reports success only then.
func TestCloseSendsReplyRecordedDuringClose(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	c := heldCounter{Counter: newMemCounter(), release: make(chan struct{})}
	b, o := newBotOutbox(t, c, vk, fastOptions(), "tok")
	hctx, hcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer hcancel()
	if err := b.HandleMessage(hctx, msg(1, "late")); err == nil {
		t.Fatal("HandleMessage answered before the count did")
	}
	var release sync.Once
	defer release.Do(func() { close(c.release) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- b.Close(ctx) }()
	// Once Close has begun, the count under way answers: Close must wait
	// for it.
	eventually.True(t, 5*time.Second, "Close began", b.Closing)
	release.Do(func() { close(c.release) })
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	if n, err := o.Len(context.Background(), 7); err != nil || n != 0 {
		t.Errorf("outbox holds %d replies (%v) after Close succeeded, want none", n, err)
	}
	if sends := vk.Sends(); len(sends) != 1 || sends[0].Message != "0" {
		t.Errorf("sends %+v, want the late message's reply", sends)
	}
}

// TestCloseEndsWaitingSendersAtOnce: two senders of one community (two
// tokens) and a sender of another instance wait for new replies on the
// same stream, with a long Poll. Close ends this instance's waits at once,
// whoever else reads the stream, and returns long before Poll.
func TestCloseEndsWaitingSendersAtOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		prefix := redistest.Prefix(t)
		opts := fastOptions()
		opts.Poll = time.Minute
		var waiting waitingReads
		b, _ := startBotHooked(t, tg, prefix, "closing", newMemCounter(), &waiting, opts, vkSenders(vk, "t1", "t2")...)
		other := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "other"})
		defer other.Close()
		other.AddHook(&waiting)
		otherWait, stopOther := context.WithCancel(context.Background())
		defer stopOther()
		go other.Take(otherWait, 7, 25, time.Minute)
		eventually.True(t, 10*time.Second, "three reads wait", func() bool { return waiting.n.Load() == 3 })

		// Close's deadline is far below Poll: it ends in time, with nothing
		// left, only if it ended its senders' waits.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close = %v, want nil: nothing to send", err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestCloseKeepsItsDeadlineWhileASendHangs: a send does not return (a
// Sender that ignores its context). Close still returns at its deadline,
// hands the reply back so that another instance can send it at once, and
// no send begins after Close returned.
func TestCloseKeepsItsDeadlineWhileASendHangs(t *testing.T) {
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		release := make(chan struct{})
		var calls atomic.Int64
		var once sync.Once
		hung := bot.SenderFunc(func(_ context.Context, rs []bot.Reply) []error {
			calls.Add(1)
			<-release
			return make([]error, len(rs))
		})
		defer once.Do(func() { close(release) })
		b, _ := startBot(t, tg, prefix, "closing", newMemCounter(), fastOptions(), hung)
		if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 10*time.Second, "one send under way", func() bool { return calls.Load() == 1 })

		// A tenth of Close's time is kept for the hand-back: 5 s leave it
		// 500 ms, enough for one script on a machine at load 8 (200 ms
		// was not, once).
		const deadline = 5 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		err := b.Close(ctx)
		took := time.Since(start)
		if !errors.Is(err, bot.ErrNotDrained) {
			t.Errorf("Close = %v, want ErrNotDrained", err)
		}
		if took > deadline+time.Second {
			t.Errorf("Close took %v with a deadline of %v", took, deadline)
		}
		next := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "next"})
		defer next.Close()
		if got, err := next.Take(context.Background(), 7, 25, 0); err != nil || len(got) != 1 {
			t.Errorf("another instance's Take = %+v, %v; want the reply handed back", got, err)
		}
		once.Do(func() { close(release) })
		// Close again waits for the worker the hung send held; once it is
		// gone, no send can begin.
		again, cancelAgain := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelAgain()
		b.Close(again)
		if n := calls.Load(); n != 1 {
			t.Errorf("%d sends, want none after Close returned", n)
		}
	}, redistest.Mini, redistest.Real)
}

// TestClosingInstanceLeavesNewRepliesToOthers: another instance keeps
// storing replies in the shared outbox while this one shuts down. The
// closing instance sends what it holds and what was stored before it
// began to drain, but takes no newer replies: Close returns at once, and
// nothing is left pending under its name.
func TestClosingInstanceLeavesNewRepliesToOthers(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.SetDelay(20 * time.Millisecond)
		prefix := redistest.Prefix(t)
		b, _ := startBot(t, tg, prefix, "closing", newMemCounter(), fastOptions(), vkSenders(vk, "t1")...)
		live := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "live"})
		defer live.Close()
		stop := make(chan struct{})
		var added atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() { // the live instance's webhook
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				r := outbox.Entry{GroupID: 7, PeerID: 1000 + i, Message: "1", RandomID: int32(i + 1), Key: fmt.Sprint(i), Queued: time.Now()}
				if err := live.Add(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
				added.Add(1)
			}
		})
		defer wg.Wait()
		defer close(stop)
		eventually.True(t, 10*time.Second, "the live instance stored replies", func() bool { return added.Load() >= 50 })

		// The live instance stores replies for as long as Close runs: Close
		// ends within its deadline only if the closing instance takes none
		// of those stored after it began to drain.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close = %v, want nil", err)
		}
		if n := pendingUnder(t, tg, prefix, "closing"); n != 0 {
			t.Errorf("%d replies pending under the closed instance, want none", n)
		}
	}, redistest.Mini, redistest.Real)
}

// TestCloseDeadlineHandsRepliesBack: VK refuses every send until Close's
// deadline. The replies stay in the outbox, and not as held by the closed
// instance: another instance takes them at once, not after ClaimAfter.
func TestCloseDeadlineHandsRepliesBack(t *testing.T) {
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.FailAlways(10)
		prefix := redistest.Prefix(t)
		b, o := startBot(t, tg, prefix, "closing", newMemCounter(), fastOptions(), vkSenders(vk, "t1", "t2")...)
		for i := range 5 {
			if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, 10*time.Second, "two sends", func() bool { return vk.Calls("messages.send")+vk.Calls("execute") >= 2 })
		// The hand-back gets a tenth of the deadline: 300 ms, room for a
		// few Redis calls on a loaded machine (20 ms of a 200 ms deadline
		// was not).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := b.Close(ctx); !errors.Is(err, bot.ErrNotDrained) {
			t.Fatalf("Close = %v, want ErrNotDrained", err)
		}
		if n, err := o.Len(context.Background(), 7); err != nil || n != 5 {
			t.Errorf("outbox holds %d replies (%v), want all 5", n, err)
		}
		if n := pendingUnder(t, tg, prefix, "closing"); n != 0 {
			t.Errorf("%d replies pending under the closed instance, want none", n)
		}
		next := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "next"})
		defer next.Close()
		if got, err := next.Take(context.Background(), 7, 25, 0); err != nil || len(got) != 5 {
			t.Errorf("the next instance's Take = %d replies, %v; want all 5 at once", len(got), err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestStartMessageGaveUp: the webhook's way (callback.MessageStarter): a
// message of a community not served is refused at once; a message whose
// count is held is given up (counted late, the error said), its record
// goes on, its result comes on the channel, and its reply is sent once.
func TestStartMessageGaveUp(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	c := heldCounter{Counter: newMemCounter(), release: make(chan struct{})}
	b := newBot(t, c, vk, "tok")
	other := msg(2, "elsewhere")
	other.GroupID = 8
	if err := <-b.StartMessage(other); err == nil {
		t.Error("a message of community 8, not served, was accepted")
	}
	result := b.StartMessage(msg(1, "late"))
	if err := b.GaveUp(msg(1, "late"), context.DeadlineExceeded); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GaveUp = %v, want the deadline wrapped", err)
	}
	if late := b.Stats().Late; late != 1 {
		t.Errorf("%d late, want 1", late)
	}
	close(c.release)
	if err := <-result; err != nil {
		t.Fatalf("the late record: %v", err)
	}
	if sends := waitSends(t, vk, 1); sends[0].Message != "0" {
		t.Errorf("sends %+v, want the late message's reply", sends)
	}
}
