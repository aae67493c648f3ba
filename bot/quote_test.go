package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/vktest"
)

const chat = bot.ChatPeerBase + 5

func TestParseQuote(t *testing.T) {
	for _, s := range []string{"chats", "all", "off"} {
		q, err := bot.ParseQuote(s)
		if err != nil || q.String() != s {
			t.Errorf("ParseQuote(%q) = %v, %v", s, q, err)
		}
	}
	if _, err := bot.ParseQuote("yes"); err == nil {
		t.Error("ParseQuote accepted yes")
	}
	var zero bot.Quote
	if zero != bot.QuoteChats {
		t.Error("the zero Quote is not chats")
	}
}

// TestRepliesQuoteTheMessage runs the bot with each REPLY_QUOTE mode on a
// chat message, a private one with its id and a private one without.
func TestRepliesQuoteTheMessage(t *testing.T) {
	messages := []callback.Message{
		{GroupID: 7, EventID: "c", PeerID: chat, FromID: 11, ConversationMessageID: 321, Text: "in a chat"},
		{GroupID: 7, EventID: "p", PeerID: 12, FromID: 12, ID: 654, ConversationMessageID: 9, Text: "private"},
		{GroupID: 7, EventID: "n", PeerID: 13, FromID: 13, ConversationMessageID: 4, Text: "private, no id"},
	}
	type quote struct{ cmid, replyTo int }
	tests := []struct {
		q    bot.Quote
		want []quote // by message
	}{
		{bot.QuoteChats, []quote{{321, 0}, {0, 0}, {0, 0}}},
		{bot.QuoteAll, []quote{{321, 0}, {0, 654}, {0, 0}}},
		{bot.QuoteOff, []quote{{0, 0}, {0, 0}, {0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.q.String(), func(t *testing.T) {
			vk := vktest.NewServer()
			defer vk.Close()
			opts := fastOptions()
			opts.Quote = tt.q
			b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "tok")
			for _, m := range messages {
				if err := b.HandleMessage(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			byPeer := map[int]vktest.Send{}
			for _, s := range waitSends(t, vk, len(messages)) {
				byPeer[s.PeerID] = s
			}
			for i, m := range messages {
				s := byPeer[m.PeerID]
				var got quote
				if f := s.Forward; f != nil {
					if f.PeerID != m.PeerID || len(f.ConversationMessageIDs) != 1 || !f.IsReply {
						t.Errorf("%s: forward %+v", m.Text, f)
					}
					got.cmid = f.ConversationMessageIDs[0]
				}
				got.replyTo = s.ReplyTo
				if got != tt.want[i] {
					t.Errorf("%s: quote %+v, want %+v", m.Text, got, tt.want[i])
				}
			}
		})
	}
}

// TestForwardInSingleSendAndExecute sends quoted replies one at a time and
// as one execute batch: each carries its own quote.
func TestForwardInSingleSendAndExecute(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	s := bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})
	reply := func(i int) bot.Reply {
		return bot.Reply{GroupID: 7, PeerID: chat + i, Message: "0", RandomID: int32(100 + i), QuoteCMID: 500 + i}
	}
	if errs := s.Send(context.Background(), []bot.Reply{reply(0)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	batch := []bot.Reply{reply(1), reply(2), {GroupID: 7, PeerID: 40, Message: "1", RandomID: 9, ReplyTo: 77}}
	for _, err := range s.Send(context.Background(), batch) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if vk.Calls("messages.send") != 1 || vk.Calls("execute") != 1 {
		t.Fatalf("calls: %d messages.send, %d execute; want 1 and 1", vk.Calls("messages.send"), vk.Calls("execute"))
	}
	sends := vk.Sends()
	for i := range 3 {
		f := sends[i].Forward
		if f == nil || f.PeerID != chat+i || len(f.ConversationMessageIDs) != 1 || f.ConversationMessageIDs[0] != 500+i || !f.IsReply {
			t.Errorf("send %d: forward %+v, want conversation_message_id %d of peer %d", i, f, 500+i, chat+i)
		}
	}
	if sends[3].ReplyTo != 77 || sends[3].Forward != nil {
		t.Errorf("private reply in execute: %+v", sends[3])
	}
}

// TestRefusedQuoteStillReplies: VK refusing a quote (error 100) costs the
// quote, not the reply; a reply refused with 100 that has no quote to drop
// stays refused.
func TestRefusedQuoteStillReplies(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	b := newBot(t, newMemCounter(), vk, "tok")
	vk.FailNext(100)
	quoted := callback.Message{GroupID: 7, EventID: "q", PeerID: chat, FromID: 11, ConversationMessageID: 3, Text: "x"}
	if err := b.HandleMessage(context.Background(), quoted); err != nil {
		t.Fatal(err)
	}
	waitSends(t, vk, 1)
	if msgs := vk.Messages(); len(msgs) != 1 || msgs[0].PeerID != chat || msgs[0].Forward != nil {
		t.Fatalf("delivered %+v; want the reply without its quote", msgs)
	}
	if n := vk.Calls("messages.send"); n != 2 {
		t.Errorf("%d calls of messages.send, want 2 (quoted, then without)", n)
	}

	vk.FailNext(100)
	if err := b.HandleMessage(context.Background(), msg(1, "y")); err != nil { // private: no quote
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "the unquoted reply refused with 100 dropped", func() bool { return b.Stats().Dropped > 0 })
	if n := vk.Calls("messages.send"); n != 3 {
		t.Errorf("%d calls of messages.send, want 3 (no second try of the unquoted reply)", n)
	}
}

// TestRefusedQuoteKeepsTheRate: the reply sent again without its quote
// waits for the token's rate like any call, so VK never answers error 6
// (too many requests) for it.
func TestRefusedQuoteKeepsTheRate(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.SetRateLimit(3) // per second; the bot makes 2
	var mu sync.Mutex
	var results []string
	sender := bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second,
		OnCall: func(_, result string, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			results = append(results, result)
		}})
	opts := fastOptions()
	opts.RatePerToken, opts.MaxBatch = 2, 1
	o := newOutbox(t, outbox.Options{Counter: newMemCounter()})
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{sender}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	vk.FailNext(100, 0, 100, 0) // each quote refused, each reply then accepted
	for i := range 2 {
		m := callback.Message{GroupID: 7, EventID: fmt.Sprint("q", i), PeerID: chat, FromID: 11, ConversationMessageID: 3 + i, Text: "x"}
		if err := b.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitSends(t, vk, 2)
	for _, m := range vk.Messages() {
		if m.Forward != nil {
			t.Errorf("reply %+v delivered with its quote; want it sent again without", m)
		}
	}
	want := fmt.Sprint([]string{"100", "0", "100", "0"})
	// The sender reports a call once its answer is read, after vktest
	// recorded it.
	eventually.NoError(t, 5*time.Second, "VK's answers", func() error {
		mu.Lock()
		defer mu.Unlock()
		if got := fmt.Sprint(results); got != want {
			return fmt.Errorf("VK answered %v, want %v", got, want)
		}
		return nil
	})
}

// TestForwardParamIsJSON: forwardParam writes what encoding/json writes of
// the forward object.
func TestForwardParamIsJSON(t *testing.T) {
	for _, c := range [][2]int{{1, 1}, {2000000001, 77}, {-123, 0}, {2147483647, 9007199254740991}} {
		want, _ := json.Marshal(struct {
			PeerID  int   `json:"peer_id"`
			CMIDs   []int `json:"conversation_message_ids"`
			IsReply bool  `json:"is_reply"`
		}{c[0], []int{c[1]}, true})
		if got := bot.ForwardParam(c[0], c[1]); got != string(want) {
			t.Errorf("forwardParam(%d, %d) = %s, want %s", c[0], c[1], got, want)
		}
	}
}

// TestExecuteArgIsSendParams: a reply's argument inside execute is the
// JSON of the parameters a single messages.send gets.
func TestExecuteArgIsSendParams(t *testing.T) {
	for _, r := range []bot.Reply{
		{PeerID: 101, Message: "0", RandomID: 1},
		{PeerID: 2000000001, Message: "12", RandomID: -2147483648, QuoteCMID: 5},
		{PeerID: 7, Message: "\"quoted\" <b>&</b> \\ \n\t\u0001 привет \u2028", RandomID: 2147483647, ReplyTo: 99},
	} {
		var got, want map[string]any
		if err := json.Unmarshal([]byte(bot.ExecuteArg(r)), &got); err != nil {
			t.Fatalf("%+v: %s: %v", r, bot.ExecuteArg(r), err)
		}
		b, err := json.Marshal(bot.SendParams(r))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("execute argument %s, want the parameters %s", bot.ExecuteArg(r), b)
		}
	}
}
