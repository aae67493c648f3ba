package bot_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/testclock"
	"github.com/vkcounter/vkcounter/vktest"
)

// TestFloodControlDelaysOnlyThatPeer: flood control (9) on a reply to one
// peer puts that reply aside for FloodPause; the other peers' replies keep
// flowing meanwhile, and the flooded one goes out once after the pause, on
// the clock the bot and its outbox share (an hour passes when the test
// says so).
func TestFloodControlDelaysOnlyThatPeer(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	var clock testclock.Clock
	opts := fastOptions()
	opts.FloodPause, opts.FloodMax = time.Hour, time.Hour
	opts.MaxBatch = 1 // one send per call, so the flooded call is the flooded reply alone
	opts.Clock = clock.Now
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	flooded := msg(1, "flood")
	vk.FailPeer(flooded.PeerID, 9, 1)
	if err := b.HandleMessage(context.Background(), flooded); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "the flooded send refused", func() bool { return vk.PeerCalls(flooded.PeerID) >= 1 })
	for i := 2; i <= 4; i++ {
		if err := b.HandleMessage(context.Background(), msg(i, "others")); err != nil {
			t.Fatal(err)
		}
	}
	others := waitSends(t, vk, 3)
	for _, s := range others {
		if s.PeerID == flooded.PeerID {
			t.Fatalf("the flooded reply went out before its pause: %+v", others)
		}
	}
	if n := vk.PeerCalls(flooded.PeerID); n != 1 {
		t.Fatalf("the flooded peer was called %d times before its pause passed, want once", n)
	}
	clock.Advance(opts.FloodPause)
	all := waitSends(t, vk, 4)
	if last := all[3]; last.PeerID != flooded.PeerID || last.Message != "0" {
		t.Errorf("last send %+v, want the flooded reply", last)
	}
	b.Close(context.Background())
	if n := len(vk.Sends()); n != 4 {
		t.Errorf("%d sends accepted, want 4", n)
	}
}

// TestRedisStallDuringReadAndAck: Redis stalls while the sender waits in
// its outbox read, and again while it acknowledges sent replies. Every reply
// goes out exactly once, and the outbox ends empty.
func TestRedisStallDuringReadAndAck(t *testing.T) {
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		via, err := redisconn.Open(redisconn.Config{Addr: proxy.Addr(), Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer via.Close()
		senderSide := outbox.New(via, outbox.Options{Prefix: prefix, Consumer: "sender", Counter: newMemCounter()})
		defer senderSide.Close()
		var waiting waitingReads
		senderSide.AddHook(&waiting)
		if err := senderSide.Init(ctx, 7); err != nil {
			t.Fatal(err)
		}
		writer := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: "writer"})
		vk := vktest.NewServer()
		defer vk.Close()
		opts := fastOptions()
		opts.Poll = 500 * time.Millisecond
		b, err := bot.New(senderSide, senderSide, []bot.Group{{ID: 7, Senders: []bot.Sender{
			bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})}}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(ctx)
		add := func(from, to int) {
			for p := from; p < to; p++ {
				r := outbox.Entry{GroupID: 7, PeerID: p, Message: fmt.Sprint(p), RandomID: int32(p), Key: fmt.Sprint(p), Queued: time.Now()}
				if err := writer.Add(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}

		// A real stall, on the machine's clock (no test clock moves Redis's
		// or the proxy's): longer than Poll, so the read's own wait ends
		// inside it.
		const stall = 3 * time.Second

		// The sender is blocked in its read when Redis stalls.
		eventually.True(t, 10*time.Second, "the sender's read waits", func() bool { return waiting.n.Load() == 1 })
		proxy.Stall()
		add(1, 6)
		time.Sleep(stall)
		proxy.Resume()
		waitSends(t, vk, 5)

		// Redis stalls while VK answers: the acknowledgement waits.
		vk.SetDelay(500 * time.Millisecond)
		calls := func() int { return vk.Calls("messages.send") + vk.Calls("execute") }
		before := calls()
		add(6, 11)
		eventually.True(t, 10*time.Second, "a send under way", func() bool { return calls() > before }) // a send is under way: its Done comes after the stall begins
		proxy.Stall()
		time.Sleep(stall)
		proxy.Resume()
		vk.SetDelay(0)
		waitSends(t, vk, 10)
		eventually.True(t, 10*time.Second, "the outbox emptied", func() bool {
			n, err := writer.Len(ctx, 7)
			return err == nil && n == 0
		})
		// Once Close returned no send can begin: the sends are all there were.
		closing, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := b.Close(closing); err != nil {
			t.Errorf("Close = %v, want nil: the outbox is empty", err)
		}
		var peers []int
		for _, s := range vk.Sends() {
			peers = append(peers, s.PeerID)
		}
		slices.Sort(peers)
		if !slices.Equal(peers, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Errorf("sends to %v, want each of 1..10 once", peers)
		}
	}, redistest.Mini, redistest.Real)
}
