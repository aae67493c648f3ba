package service

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/vktest"
)

// TestChatRepliesQuoteTheirMessage: through the webhook and through long
// poll, a reply in a group chat quotes the message it answers (forward with
// its conversation_message_id); a private reply does not by default, and
// with REPLY_QUOTE=all it uses reply_to.
func TestChatRepliesQuoteTheirMessage(t *testing.T) {
	const chat = bot.ChatPeerBase + 3
	webhook := startApp(t, nil, map[string]string{"REPLY_QUOTE": "all"})
	webhook.MustOK(t, event("w1", chat, 41, "quoted"))
	webhook.MustOK(t, event("w2", 500, 42, "private"))
	lpVK := newLongPollVK(t, 10)
	startLongPoll(t, nil, lpVK, nil) // REPLY_QUOTE=chats, the default
	lpVK.QueueEvents(testGroup, event("l1", chat, 43, "quoted"), event("l2", 500, 44, "private"))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		name      string
		vk        *vktest.Server
		chatCMID  int
		privateTo int
	}{
		{"webhook, REPLY_QUOTE=all", webhook.VK, 41, 42},
		{"long poll, REPLY_QUOTE=chats", lpVK, 43, 0},
	} {
		sends, err := c.vk.WaitSends(ctx, 2)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, s := range sends {
			cmid := 0
			if f := s.Forward; f != nil {
				if f.PeerID != s.PeerID || len(f.ConversationMessageIDs) != 1 || !f.IsReply {
					t.Errorf("%s: forward %+v", c.name, f)
					continue
				}
				cmid = f.ConversationMessageIDs[0]
			}
			wantCMID, wantTo := 0, c.privateTo
			if s.PeerID == chat {
				wantCMID, wantTo = c.chatCMID, 0
			}
			if cmid != wantCMID || s.ReplyTo != wantTo {
				t.Errorf("%s: reply to peer %d quotes cmid %d, reply_to %d; want %d, %d", c.name, s.PeerID, cmid, s.ReplyTo, wantCMID, wantTo)
			}
		}
	}

	_, _, err := config.Parse(flag.NewFlagSet("serve", flag.ContinueOnError), nil, func(k string) string { return map[string]string{"REPLY_QUOTE": "yes"}[k] }, func() {})
	if err == nil || !strings.Contains(err.Error(), "REPLY_QUOTE") {
		t.Errorf("REPLY_QUOTE=yes: %v", err)
	}
}
