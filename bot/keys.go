package bot

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/vkcounter/vkcounter/bot/msgkey"
	"github.com/vkcounter/vkcounter/callback"
)

// The bot keys a message two ways. Its text key says what counts as "the
// same message": it is what the bot counts. Its message key (package
// msgkey) says which one message VK delivered: everything done once per
// message is keyed by it (the count's dedupe, the stored reply, the
// reply's random_id).

// MessageKey returns the message key of m, from which its dedupe key,
// reply key and reply's random_id derive (see package msgkey).
func MessageKey(m callback.Message) msgkey.Message {
	return msgkey.Message{GroupID: m.GroupID, PeerID: m.PeerID, ConversationMessageID: m.ConversationMessageID, ID: m.ID, EventID: m.EventID}
}

// TextKey returns what makes two messages "the same message": the
// community they were sent to and their text exactly as received; a message
// with no text is identified by its attachments, in order (a sticker by its
// sticker id, a link by its URL, anything else as type:owner_id_id). A
// message with neither is the empty message.
//
// With normalize, the text is case-folded and its runs of white space are
// collapsed to one space and trimmed, so "Hi  there" and "hi there " are
// the same message.
func TextKey(m callback.Message, normalize bool) string {
	text := m.Text
	if normalize {
		text = normalizeText(text)
	}
	if text != "" || len(m.Attachments) == 0 {
		// One allocation: the common case.
		var buf [24]byte
		g := strconv.AppendInt(buf[:0], int64(m.GroupID), 10)
		return string(g) + ":t:" + text
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(m.GroupID))
	b.WriteString(":a:")
	for i, a := range m.Attachments {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(attachmentKey(a))
	}
	return b.String()
}

// SplitTextKey reads back a text key (TextKey), or the start of one: the
// community, and the text or, for a message without text, its attachment
// keys in order. ok is false for a string that is not a text key.
func SplitTextKey(key string) (group int, text string, attachments []string, ok bool) {
	g, rest, found := strings.Cut(key, ":")
	if !found || len(rest) < 2 || rest[1] != ':' {
		return 0, "", nil, false
	}
	group, err := strconv.Atoi(g)
	if err != nil {
		return 0, "", nil, false
	}
	switch rest[0] {
	case 't':
		return group, rest[2:], nil, true
	case 'a':
		return group, "", strings.Split(rest[2:], " "), true
	}
	return 0, "", nil, false
}

func attachmentKey(a callback.Attachment) string {
	switch {
	case a.Type == "sticker":
		return "sticker:" + strconv.FormatInt(a.StickerID, 10)
	case a.URL != "":
		return a.Type + ":" + a.URL
	default:
		return a.Type + ":" + strconv.FormatInt(a.OwnerID, 10) + "_" + strconv.FormatInt(a.ID, 10)
	}
}

// ParseAttachmentKey reads one attachment as TextKey writes it into a text
// key: "sticker:ID", "type:owner_id_id" (photo:-5_42) or "type:URL"
// (link:https://vk.com). It is how a caller names a message without text,
// e.g. to ask how often a sticker was seen.
func ParseAttachmentKey(s string) (callback.Attachment, error) {
	typ, rest, ok := strings.Cut(s, ":")
	if !ok || typ == "" || rest == "" || strings.ContainsAny(s, " \t\n") {
		return callback.Attachment{}, fmt.Errorf("attachment %q: want sticker:ID, type:owner_id_id (photo:-5_42) or type:URL", s)
	}
	if typ == "sticker" {
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return callback.Attachment{}, fmt.Errorf("attachment %q: a sticker's id is a number", s)
		}
		return callback.Attachment{Type: typ, StickerID: id}, nil
	}
	if owner, id, ok := strings.Cut(rest, "_"); ok {
		o, err1 := strconv.ParseInt(owner, 10, 64)
		i, err2 := strconv.ParseInt(id, 10, 64)
		if err1 == nil && err2 == nil {
			return callback.Attachment{Type: typ, OwnerID: o, ID: i}, nil
		}
	}
	return callback.Attachment{Type: typ, URL: rest}, nil
}

func normalizeText(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}
