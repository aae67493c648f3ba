package bot_test

import (
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
)

func TestTextKey(t *testing.T) {
	photo := callback.Attachment{Type: "photo", OwnerID: -5, ID: 42}
	sticker := callback.Attachment{Type: "sticker", StickerID: 9}
	tests := []struct {
		name      string
		a, b      callback.Message
		normalize bool
		same      bool
	}{
		{"same text", callback.Message{GroupID: 1, Text: "hi"}, callback.Message{GroupID: 1, Text: "hi", PeerID: 5}, false, true},
		{"text is exact", callback.Message{GroupID: 1, Text: "hi"}, callback.Message{GroupID: 1, Text: "Hi "}, false, false},
		{"normalized case and space", callback.Message{GroupID: 1, Text: "Hi  there"}, callback.Message{GroupID: 1, Text: " hi there\n"}, true, true},
		{"communities are separate", callback.Message{GroupID: 1, Text: "hi"}, callback.Message{GroupID: 2, Text: "hi"}, false, false},
		{"same sticker", callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker}}, callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker}}, false, true},
		{"sticker differs from photo", callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker}}, callback.Message{GroupID: 1, Attachments: []callback.Attachment{photo}}, false, false},
		{"attachment order matters", callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker, photo}}, callback.Message{GroupID: 1, Attachments: []callback.Attachment{photo, sticker}}, false, false},
		{"text wins over attachments", callback.Message{GroupID: 1, Text: "look", Attachments: []callback.Attachment{photo}}, callback.Message{GroupID: 1, Text: "look"}, false, true},
		{"empty message", callback.Message{GroupID: 1}, callback.Message{GroupID: 1, Text: ""}, false, true},
		{"empty text is not a sticker", callback.Message{GroupID: 1}, callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker}}, false, false},
		{"text cannot imitate an attachment", callback.Message{GroupID: 1, Text: "sticker:9"}, callback.Message{GroupID: 1, Attachments: []callback.Attachment{sticker}}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := bot.TextKey(tc.a, tc.normalize), bot.TextKey(tc.b, tc.normalize)
			if (a == b) != tc.same {
				t.Errorf("TextKey %q vs %q: same=%v, want %v", a, b, a == b, tc.same)
			}
		})
	}
}

// TestParseAttachmentKey: every attachment key TextKey writes reads back
// as the attachment, so a message named by its attachments' keys gets the
// text key of the message itself; a malformed key is refused.
func TestParseAttachmentKey(t *testing.T) {
	for _, a := range []callback.Attachment{
		{Type: "sticker", StickerID: 9},
		{Type: "photo", OwnerID: -5, ID: 42},
		{Type: "doc", OwnerID: 7, ID: 0},
		{Type: "link", URL: "https://vk.com/wall-1_2?x=a:b"},
	} {
		m := callback.Message{GroupID: 3, Attachments: []callback.Attachment{a}}
		key := bot.TextKey(m, false)
		one := key[len("3:a:"):]
		got, err := bot.ParseAttachmentKey(one)
		if err != nil {
			t.Fatalf("ParseAttachmentKey(%q): %v", one, err)
		}
		if again := bot.TextKey(callback.Message{GroupID: 3, Attachments: []callback.Attachment{got}}, false); again != key {
			t.Errorf("%q read back as %+v, whose key is %q", one, got, again)
		}
	}
	for _, bad := range []string{"", "sticker", ":5", "photo:", "sticker:x", "link:a b"} {
		if _, err := bot.ParseAttachmentKey(bad); err == nil {
			t.Errorf("ParseAttachmentKey(%q) accepted", bad)
		}
	}
}

// TestSplitTextKey: a text key reads back as its community and its text or
// attachments; anything else is not a text key.
func TestSplitTextKey(t *testing.T) {
	photo := callback.Attachment{Type: "photo", OwnerID: -5, ID: 42}
	sticker := callback.Attachment{Type: "sticker", StickerID: 9}
	for _, tc := range []struct {
		m    callback.Message
		want string // the attachments
	}{
		{callback.Message{GroupID: 7, Text: "hi: there"}, ""},
		{callback.Message{GroupID: 7, Text: ""}, ""},
		{callback.Message{GroupID: 218245623, Attachments: []callback.Attachment{sticker, photo}}, "sticker:9 photo:-5_42"},
	} {
		m := tc.m
		g, text, atts, ok := bot.SplitTextKey(bot.TextKey(m, false))
		if !ok || g != m.GroupID || text != m.Text || strings.Join(atts, " ") != tc.want {
			t.Errorf("SplitTextKey(TextKey(%+v)) = %d %q %q %v", m, g, text, atts, ok)
		}
	}
	for _, s := range []string{"", "7", "7:", "7:x:hi", "x:t:hi", "7t:hi"} {
		if _, _, _, ok := bot.SplitTextKey(s); ok {
			t.Errorf("SplitTextKey(%q) ok", s)
		}
	}
}
