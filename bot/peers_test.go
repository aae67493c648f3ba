package bot_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

// delivered returns the messages VK delivered to peer.
func delivered(vk *vktest.Server, peer int) []vktest.Send {
	var out []vktest.Send
	for _, m := range vk.Messages() {
		if m.PeerID == peer {
			out = append(out, m)
		}
	}
	return out
}

// peerMsg is message i of peer.
func peerMsg(peer, i int) callback.Message {
	return callback.Message{GroupID: 7, EventID: fmt.Sprint("p", peer, "-", i), PeerID: peer, FromID: 11,
		ConversationMessageID: 1 + i, Text: "x"}
}

// peerOptions are fastOptions with VK's backoffs at their default scale,
// so a reply set aside stays so while the others are sent.
func peerOptions() bot.Options {
	o := fastOptions()
	o.RetryBase, o.RetryMax = 200*time.Millisecond, 2*time.Second
	return o
}

// TestOneFailingPeerHoldsUpNoOther: one instance alone; every send to one
// user answers 10 (VK's internal error). That reply is set aside with its
// own backoff: replies to five other users posted after it are delivered
// while VK still refuses it (within 5 s), and that user's reply once VK
// takes it again.
func TestOneFailingPeerHoldsUpNoOther(t *testing.T) {
	t.Parallel() // mostly waits on backoffs
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		const failing = 500
		vk.FailPeer(failing, 10, -1)
		b, _ := startBot(t, tg, redistest.Prefix(t), "alone", newMemCounter(), peerOptions(), vkSenders(vk, "tok")...)
		for i := range 3 {
			if err := b.HandleMessage(context.Background(), peerMsg(failing, i)); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, 10*time.Second, "the failing user's first send", func() bool { return vk.PeerCalls(failing) >= 1 })
		start := time.Now()
		for i := range 5 {
			if err := b.HandleMessage(context.Background(), peerMsg(600+i, 0)); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, 10*time.Second, "the five others delivered", func() bool { return len(vk.Messages()) >= 5 })
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the five others took %v, want within 5 s", took)
		}
		if n := len(delivered(vk, failing)); n != 0 {
			t.Fatalf("%d replies delivered to the failing user while VK refused them", n)
		}
		// Each of its replies waits for the one probing its peer: far
		// fewer sends than replies times tries.
		calls := vk.PeerCalls(failing)
		vk.FailPeer(failing, 0, 0) // VK recovers
		eventually.True(t, 20*time.Second, "the failing user's replies once VK recovers", func() bool { return b.Stats().Sent == 8 })
		if st, n := b.Stats(), len(delivered(vk, failing)); n != 3 || st.Dropped != 0 {
			t.Errorf("%d delivered to the failing user, stats %+v; want 3, none dropped", n, st)
		}
		t.Logf("%d sends to the failing user while it failed", calls)
	}, redistest.Mini, redistest.Real)
}

// TestPeerRefusalsConcernThatPeer: two instances on one token and one
// Redis. 912 from a chat (the community's chat-bot feature is off) drops
// that chat's reply and nothing else: private replies are delivered and
// both instances stay ready. 932 for a user (the community can't interact
// with this peer) and 15 (access denied) drop that reply after one call.
func TestPeerRefusalsConcernThatPeer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		peer int
		code int
	}{
		{"912 chat-bot feature off", chat, 912},
		{"932 community can't interact", 700, 932},
		{"15 access denied", 701, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
				vk := vktest.NewServer()
				defer vk.Close()
				vk.FailPeer(tc.peer, tc.code, -1)
				prefix, c := redistest.Prefix(t), newMemCounter()
				one, _ := startBot(t, tg, prefix, "one", c, peerOptions(), vkSenders(vk, "tok")...)
				two, _ := startBot(t, tg, prefix, "two", c, peerOptions(), vkSenders(vk, "tok")...)
				bots := []*bot.Bot{one, two}
				if err := one.HandleMessage(context.Background(), peerMsg(tc.peer, 0)); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				for i := range 6 {
					if err := bots[i%2].HandleMessage(context.Background(), peerMsg(800+i, 0)); err != nil {
						t.Fatal(err)
					}
				}
				eventually.True(t, 10*time.Second, "the private replies delivered", func() bool {
					for _, b := range bots {
						if err := b.Ready(); err != nil {
							t.Fatalf("not ready: %v", err)
						}
					}
					return len(vk.Messages()) >= 6
				})
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("private replies took %v, want within 5 s", took)
				}
				eventually.True(t, 10*time.Second, "the refused reply dropped", func() bool {
					return one.Stats().Dropped+two.Stats().Dropped == 1
				})
				if n := vk.PeerCalls(tc.peer); n > 2 {
					t.Errorf("%d calls for the refusing peer, want at most 2", n)
				}
				for _, b := range bots {
					if err := b.Ready(); err != nil {
						t.Errorf("not ready: %v", err)
					}
				}
			}, redistest.Mini, redistest.Real)
		})
	}
}

// TestFloodControlBacksOffThatPeer: every send to one user answers 9
// (flood control). Only that peer waits, its pause doubling; the others'
// replies go on; of its replies the newest FloodKeep are kept, the oldest
// dropped with a reason and counted as flood_dropped; once VK takes its
// replies again the kept ones are delivered.
func TestFloodControlBacksOffThatPeer(t *testing.T) {
	t.Parallel()
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		const flooded = 900
		vk.FailPeer(flooded, 9, -1)
		var mu sync.Mutex
		classes := map[bot.Class]int{}
		opts := peerOptions()
		opts.FloodPause, opts.FloodMax = 100*time.Millisecond, 400*time.Millisecond
		opts.OnReplyDone = func(c bot.Class, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			classes[c]++
		}
		o := outbox.New(tg.Client, outbox.Options{Prefix: redistest.Prefix(t), Counter: newMemCounter(), FloodKeep: 3})
		t.Cleanup(func() { o.Close() })
		if err := o.Init(context.Background(), 7); err != nil {
			t.Fatal(err)
		}
		b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: vkSenders(vk, "tok")}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			b.Close(ctx)
		})
		for i := range 6 {
			if err := b.HandleMessage(context.Background(), peerMsg(flooded, i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if err := b.HandleMessage(context.Background(), peerMsg(950+i, 0)); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, 10*time.Second, "the others delivered, the flooded peer's oldest dropped", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(vk.Messages()) >= 3 && classes[bot.FloodDropped] >= 3
		})
		start, calls := time.Now(), vk.PeerCalls(flooded)
		eventually.True(t, 10*time.Second, "two more probes", func() bool { return vk.PeerCalls(flooded) >= calls+2 })
		if took := time.Since(start); took < opts.FloodPause {
			t.Errorf("two probes within %v: the pause did not grow", took)
		}
		vk.FailPeer(flooded, 0, 0)
		eventually.True(t, 10*time.Second, "the kept replies delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return classes[bot.Delivered] == 6
		})
		mu.Lock()
		defer mu.Unlock()
		if n := len(delivered(vk, flooded)); classes[bot.FloodDropped] != 3 || n != 3 {
			t.Errorf("replies done %v, %d delivered to the flooded peer; want 3 flood_dropped, its 3 newest delivered", classes, n)
		}
		drops := b.LastDrops()
		if len(drops) == 0 || drops[0].PeerID != flooded || !strings.Contains(drops[0].Error, "flood control") {
			t.Errorf("last drops %+v, want the flooded peer's, with the reason", drops)
		}
	}, redistest.Mini, redistest.Real)
}
