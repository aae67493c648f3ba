package bot_test

import (
	"context"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
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
// quote, not the reply.
func TestRefusedQuoteStillReplies(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	s := bot.NewVKSender("tok", bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 2 * time.Second})
	vk.FailNext(100, 0, 100)
	batch := []bot.Reply{
		{GroupID: 7, PeerID: chat, Message: "0", RandomID: 1, QuoteCMID: 3},
		{GroupID: 7, PeerID: chat, Message: "1", RandomID: 2, QuoteCMID: 4},
		{GroupID: 7, PeerID: 8, Message: "2", RandomID: 3}, // refused with no quote to drop: stays refused
	}
	errs := s.Send(context.Background(), batch)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("quoted replies: %v, %v; want both delivered", errs[0], errs[1])
	}
	if code, _ := bot.VKErrorCode(errs[2]); code != 100 {
		t.Errorf("unquoted reply: %v, want error 100", errs[2])
	}
	msgs := vk.Messages()
	if len(msgs) != 2 || msgs[0].RandomID != 2 || msgs[0].Forward == nil || msgs[1].RandomID != 1 || msgs[1].Forward != nil {
		t.Errorf("delivered %+v; want reply 2 quoted, then reply 1 without its quote", msgs)
	}
}
