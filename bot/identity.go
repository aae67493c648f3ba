package bot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/vkcounter/vkcounter/callback"
)

// Identity returns what makes two messages "the same message": the
// community they were sent to and their text exactly as received; a message
// with no text is identified by its attachments, in order (a sticker by its
// sticker id, a link by its URL, anything else as type:owner_id_id). A
// message with neither is the empty message.
//
// With normalize, the text is case-folded and its runs of white space are
// collapsed to one space and trimmed, so "Hi  there" and "hi there " are
// the same message.
func Identity(m callback.Message, normalize bool) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(m.GroupID))
	text := m.Text
	if normalize {
		text = normalizeText(text)
	}
	if text != "" || len(m.Attachments) == 0 {
		b.WriteString(":t:")
		b.WriteString(text)
		return b.String()
	}
	b.WriteString(":a:")
	for i, a := range m.Attachments {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(attachmentKey(a))
	}
	return b.String()
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

func normalizeText(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), unicode.IsSpace), " ")
}

// Reasons a message is not counted or answered; Answered returns them.
var (
	// ErrNotAPerson: the author is a community (from_id < 0), such as
	// another bot in a chat; answering it would let two bots answer each
	// other forever. A message with no author (from_id 0) is not a
	// person's either.
	ErrNotAPerson = errors.New("bot: not written by a person")
	// ErrOutgoing: the community's own message (out: 1).
	ErrOutgoing = errors.New("bot: outgoing message")
	// ErrServiceMessage: a chat service message (a user invited or left,
	// the title changed), which has no text of a person.
	ErrServiceMessage = errors.New("bot: chat service message")
)

// Answered returns nil when m is a message the bot counts and answers: one
// a person wrote to the community. Otherwise it returns the reason
// (ErrNotAPerson, ErrOutgoing or ErrServiceMessage), and m is neither
// counted nor answered nor added to the activity counters. A message with a
// keyboard payload is a person's message and is counted by its text.
func Answered(m callback.Message) error {
	switch {
	case m.FromID <= 0:
		return ErrNotAPerson
	case m.Out:
		return ErrOutgoing
	case m.Action != "":
		return fmt.Errorf("%w (%s)", ErrServiceMessage, m.Action)
	}
	return nil
}
