package bot_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/vktest"
)

// unknownCode is a VK error code the bot's table does not list.
const unknownCode = 4242

// quoted is a message of a group chat, which the bot's reply quotes.
func quoted(i int) callback.Message {
	return callback.Message{GroupID: 7, EventID: fmt.Sprint("q", i), PeerID: chat + i, FromID: 11, ConversationMessageID: 3 + i, Text: "x"}
}

// waitDone waits until n replies left the outbox, whatever their class.
func waitDone(t *testing.T, b *bot.Bot, n int64) bot.Stats {
	t.Helper()
	var st bot.Stats
	eventually.True(t, 10*time.Second, fmt.Sprintf("%d replies out of the outbox", n), func() bool {
		st = b.Stats()
		return st.Sent+st.Dropped >= n
	})
	return st
}

// TestQuoteRefusalsCostOnlyTheQuote: every refusal VK's schema ties to the
// quote sends the same reply again without it, in a single send and in an
// execute sub-call alike.
func TestQuoteRefusalsCostOnlyTheQuote(t *testing.T) {
	for _, code := range []int{100, 104, 913, 921, 969} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			vk := vktest.NewServer()
			defer vk.Close()
			vk.FailNext(code)
			b := newBot(t, newMemCounter(), vk, "tok")
			if err := b.HandleMessage(context.Background(), quoted(0)); err != nil {
				t.Fatal(err)
			}
			st := waitDone(t, b, 1)
			msgs := vk.Messages()
			if st.Sent != 1 || st.Dropped != 0 || len(msgs) != 1 || msgs[0].Forward != nil || msgs[0].PeerID != chat {
				t.Fatalf("stats %+v, delivered %+v; want the reply delivered without its quote", st, msgs)
			}
			if n := vk.Calls("messages.send"); n != 2 {
				t.Errorf("%d calls, want 2: quoted, then without", n)
			}
		})
	}
	t.Run("execute sub-call", func(t *testing.T) {
		vk := vktest.NewServer()
		defer vk.Close()
		opts := fastOptions()
		opts.RatePerToken = 5 // a backlog builds: the replies go in one execute
		b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
		vk.FailCalls("messages.send", 0) // the first reply alone, in a single send
		// Refusals by peer, not by call order: how the backlog is cut into
		// sends depends on when each message is stored, and a code given
		// by order could fall on the unquoted resend instead.
		vk.FailPeer(chat+2, 921, 1)
		vk.FailPeer(chat+4, 969, 1)
		for i := range 5 {
			if err := b.HandleMessage(context.Background(), quoted(i)); err != nil {
				t.Fatal(err)
			}
		}
		st := waitDone(t, b, 5)
		unquoted := 0
		for _, m := range vk.Messages() {
			if m.Forward == nil {
				unquoted++
			}
		}
		if st.Sent != 5 || st.Dropped != 0 || len(vk.Messages()) != 5 || unquoted != 2 {
			t.Errorf("stats %+v, %d delivered, %d without quote; want 5 delivered, the 2 refused ones without", st, len(vk.Messages()), unquoted)
		}
	})
}

// TestTransientAndUnknownCodesDeliverAfterRetries: errors 1 and 36, and a
// code the bot does not know, are retried until the reply is delivered.
func TestTransientAndUnknownCodesDeliverAfterRetries(t *testing.T) {
	for _, codes := range [][]int{{1}, {36, 36}, {unknownCode, unknownCode, unknownCode}} {
		t.Run(fmt.Sprint(codes), func(t *testing.T) {
			vk := vktest.NewServer()
			defer vk.Close()
			vk.FailNext(codes...)
			b := newBot(t, newMemCounter(), vk, "tok")
			if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
				t.Fatal(err)
			}
			st := waitDone(t, b, 1)
			if st.Sent != 1 || st.Dropped != 0 || len(vk.Messages()) != 1 || st.Retried != int64(len(codes)) {
				t.Errorf("stats %+v, %d delivered; want delivered after %d retries", st, len(vk.Messages()), len(codes))
			}
		})
	}
}

// TestUnknownCodeDroppedAfterBoundedTries: a reply VK keeps answering with
// a code the bot does not know is dropped after MaxUnknownTries sends, and
// reported apart (OnReplyDone's Unknown, the metric's unknown_error).
func TestUnknownCodeDroppedAfterBoundedTries(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.FailPeer(101, unknownCode, -1)
	var mu sync.Mutex
	var classes []bot.Class
	opts := fastOptions()
	opts.OnReplyDone = func(c bot.Class, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		classes = append(classes, c)
	}
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	if err := b.HandleMessage(context.Background(), msg(1, "x")); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, b, 1)
	if st.Dropped != 1 || vk.Calls("messages.send") != bot.MaxUnknownTries {
		t.Errorf("stats %+v after %d sends; want dropped after %d", st, vk.Calls("messages.send"), bot.MaxUnknownTries)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(classes) != 1 || classes[0] != bot.Unknown || classes[0].String() != "unknown_error" {
		t.Errorf("OnReplyDone classes %v, want [unknown_error]", classes)
	}
}

// sizing wraps a Sender and records how many replies each call carried.
type sizing struct {
	bot.Sender
	mu    sync.Mutex
	sizes []int
}

func (s *sizing) Send(ctx context.Context, rs []bot.Reply) []error {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(rs))
	s.mu.Unlock()
	return s.Sender.Send(ctx, rs)
}

// TestWholeExecuteFailureRetriesEveryReplySmaller: error 13 (or 36) on a
// whole execute loses none of its replies, and after 13 the next batch is
// smaller (after 36 it is not).
func TestWholeExecuteFailureRetriesEveryReplySmaller(t *testing.T) {
	for _, code := range []int{13, 36} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			vk := vktest.NewServer()
			defer vk.Close()
			vk.FailCalls("execute", code)
			s := &sizing{Sender: bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})}
			opts := fastOptions()
			opts.RatePerToken = 5 // a backlog builds
			o := newOutbox(t, outbox.Options{Counter: newMemCounter()})
			b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{s}}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 60 {
				if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := b.Stats(); st.Sent != 60 || st.Dropped != 0 || len(vk.Messages()) != 60 {
				t.Fatalf("stats %+v, %d delivered; want all 60", st, len(vk.Messages()))
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			first := -1 // the call VK failed: the first of several replies
			for i, n := range s.sizes {
				if n > 1 {
					first = i
					break
				}
			}
			if first < 0 || first+1 >= len(s.sizes) {
				t.Fatalf("calls of %v replies: no execute, or none after it", s.sizes)
			}
			failed, next := s.sizes[first], s.sizes[first+1]
			if code == 13 && next > failed/2 || code != 13 && next < failed {
				t.Errorf("calls of %v replies: after %d failed with %d the next carried %d", s.sizes, failed, code, next)
			}
		})
	}
}

// TestPermissionDeniedForOneConversation: error 7 on one sub-call drops
// that reply only while groups.getTokenPermissions says the token has the
// messages right: the token keeps sending and the service stays ready.
// When VK refuses the token, it halts instead and the reply is kept.
func TestPermissionDeniedForOneConversation(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	opts := fastOptions()
	opts.RatePerToken = 5
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
	vk.FailCalls("messages.send", 0) // the first reply alone, in a single send
	vk.FailNext(0, 0, 7)             // the second sub-call of the execute
	for i := range 6 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	st := waitDone(t, b, 6)
	if st.Sent != 5 || st.Dropped != 1 || vk.Calls("groups.getTokenPermissions") != 1 {
		t.Fatalf("stats %+v, %d token checks; want 5 sent, the one refused dropped, after one check", st, vk.Calls("groups.getTokenPermissions"))
	}
	if err := b.Ready(); err != nil {
		t.Errorf("not ready after a conversation's error 7: %v", err)
	}
	if err := b.HandleMessage(context.Background(), msg(10, "x")); err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, b, 7); st.Sent != 6 {
		t.Errorf("stats %+v: the token stopped sending", st)
	}

	// VK refuses the token itself: the reply is kept, the token halts.
	vk.FailNext(7)
	vk.FailCalls("groups.getTokenPermissions", 5)
	if err := b.HandleMessage(context.Background(), msg(11, "x")); err != nil {
		t.Fatal(err)
	}
	st = waitDone(t, b, 8)
	if st.Sent != 7 || st.Dropped != 1 || vk.Calls("groups.getTokenPermissions") != 2 {
		t.Errorf("stats %+v, %d token checks; want the reply kept through the halt, then sent", st, vk.Calls("groups.getTokenPermissions"))
	}
}
