package callback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

// Message is the part of a message_new event the bot needs.
type Message struct {
	// GroupID is the community the message was sent to.
	GroupID int
	// EventID is VK's id of the event; a re-delivery carries the same one.
	// It is empty only if VK sent none.
	EventID string

	// ID is the message id in the community's dialogs; 0 in group chats.
	ID int
	// ConversationMessageID numbers the message within its conversation.
	ConversationMessageID int
	// PeerID is the conversation to answer in: the user's id in a private
	// dialog, 2000000000+n in group chat n. It is always > 0.
	PeerID int
	// FromID is the author: a user id, or a negative community id (a
	// community or a bot writing in a chat); 0 if VK sent none.
	FromID int
	// Out reports an outgoing message: one the community itself sent.
	Out bool
	// Action is the type of a chat service message ("chat_invite_user",
	// "chat_title_update", ...), which carries no text of a person; empty
	// for an ordinary message. An action VK did not name reads "unknown".
	Action string
	// Text is the message text exactly as VK sent it.
	Text string
	// Attachments are the message's attachments, in VK's order.
	Attachments []Attachment
}

// Attachment is one attachment as the bot needs it to identify a message with no text.
type Attachment struct {
	// Type is VK's attachment type: "photo", "sticker", "doc", "audio",
	// "video", "link", "wall", ..., kept as sent for types this package
	// does not know.
	Type string
	// OwnerID is the owner of the attached object (for wall posts that
	// carry no owner_id, their to_id); 0 if it has none.
	OwnerID int64
	// ID is the object's id within its owner; 0 if it has none.
	ID int64
	// StickerID is the sticker's id; set for stickers only.
	StickerID int64
	// URL is the link's address; set for links only.
	URL string
}

// A MessageHandler handles the messages of message_new events.
//
// HandleMessage is called with the request's context, bounded by
// Options.Timeout; it must return once the context ends, even if its work
// goes on. A nil error means the message was handled: counted (now or by an
// earlier delivery of the same message), or deliberately not counted (not
// written by a person), and VK is answered "ok". Any error means it was not
// handled: VK is answered 503 and delivers the event again later.
// HandleMessage is called concurrently, once per request.
type MessageHandler interface {
	HandleMessage(ctx context.Context, m Message) error
}

// MessageHandlerFunc adapts an ordinary function to a MessageHandler.
type MessageHandlerFunc func(ctx context.Context, m Message) error

// HandleMessage calls f(ctx, m).
func (f MessageHandlerFunc) HandleMessage(ctx context.Context, m Message) error {
	return f(ctx, m)
}

var _ MessageHandler = MessageHandlerFunc(nil)

// wireMessage holds the fields of a VK message object that the bot reads.
// Every other field is skipped unread, so a change in its type can never
// turn a real message into an error. The numbers the bot reads are taken
// from a JSON integer or a string holding one; any other type in one of
// these fields is an error, as is a text that is not a string.
type wireMessage struct {
	ID                    intOrString      `json:"id"`
	ConversationMessageID intOrString      `json:"conversation_message_id"`
	PeerID                intOrString      `json:"peer_id"`
	FromID                intOrString      `json:"from_id"`
	Out                   looseBool        `json:"out"`
	Action                wireAction       `json:"action"`
	Text                  string           `json:"text"`
	Attachments           []wireAttachment `json:"attachments"`
}

// messageNewObject is the object of a message_new event in either shape:
// since API 5.103 {"message": {...}, "client_info": {...}}; before that the
// message itself. client_info is not declared, so it is never decoded. One
// pass decodes both; when "message" is present, it is the message.
type messageNewObject struct {
	Message *wireMessage `json:"message"`
	wireMessage
}

// decodeMessage decodes the object of a message_new event. The error says
// what is wrong in words safe to show the sender.
func decodeMessage(object json.RawMessage) (Message, error) {
	var obj messageNewObject
	if err := json.Unmarshal(object, &obj); err != nil {
		return Message{}, fmt.Errorf("message_new object: %w", err)
	}
	wm := &obj.wireMessage
	if obj.Message != nil {
		wm = obj.Message
	}
	if wm.PeerID <= 0 {
		return Message{}, errors.New("message_new object: no usable peer_id")
	}
	m := Message{
		ID:                    int(wm.ID),
		ConversationMessageID: int(wm.ConversationMessageID),
		PeerID:                int(wm.PeerID),
		FromID:                int(wm.FromID),
		Out:                   bool(wm.Out),
		Action:                string(wm.Action),
		Text:                  wm.Text,
	}
	if len(wm.Attachments) > 0 {
		m.Attachments = make([]Attachment, len(wm.Attachments))
		for i, a := range wm.Attachments {
			m.Attachments[i] = Attachment(a)
		}
	}
	return m, nil
}

// wireAttachment is one element of a message's attachments:
// {"type": T, T: {...}}. Only type must be well-formed; the object under T
// is read leniently (see attachmentBody).
type wireAttachment Attachment

// UnmarshalJSON decodes one attachment. It fails only if the element is not
// an object or its type is not a string.
func (a *wireAttachment) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("attachment: %w", err)
	}
	var typ string
	if raw, ok := fields["type"]; ok {
		if err := json.Unmarshal(raw, &typ); err != nil {
			return fmt.Errorf("attachment type: %w", err)
		}
	}
	var body attachmentBody
	if raw := fields[typ]; len(raw) > 0 && raw[0] == '{' {
		// Cannot fail: the raw value is a valid object and every field of
		// attachmentBody accepts any JSON value.
		_ = json.Unmarshal(raw, &body)
	}
	owner := body.OwnerID
	if owner == 0 {
		owner = body.ToID
	}
	*a = wireAttachment{
		Type:      typ,
		OwnerID:   int64(owner),
		ID:        int64(body.ID),
		StickerID: int64(body.StickerID),
	}
	// Only a link is its URL: the URLs of docs, audio messages and the like
	// carry per-request signatures and would make the same file look new.
	if typ == "link" {
		a.URL = string(body.URL)
	}
	return nil
}

// attachmentBody holds what identifies an attached object. Attachment types
// differ (a sticker has no id, some newer types use string ids), so every
// field accepts any JSON value and keeps only what it can use.
type attachmentBody struct {
	ID        looseInt    `json:"id"`
	OwnerID   looseInt    `json:"owner_id"`
	ToID      looseInt    `json:"to_id"` // the owner of a wall post in message attachments
	StickerID looseInt    `json:"sticker_id"`
	URL       looseString `json:"url"`
}

// looseInt is an int64 read from a JSON integer or a string holding one.
// Any other value reads as 0.
type looseInt int64

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (n *looseInt) UnmarshalJSON(data []byte) error {
	v, ok := parseInt(bytes.Trim(data, `"`), 64)
	if !ok {
		v = 0
	}
	*n = looseInt(v)
	return nil
}

// intOrString is an int read from a JSON integer or from a string holding
// one, so that VK sending a number as a string does not reject a message.
// null reads as 0; any other value is an error.
type intOrString int

// UnmarshalJSON implements json.Unmarshaler.
func (n *intOrString) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	digits := bytes.Trim(data, `"`)
	v, ok := parseInt(digits, strconv.IntSize)
	if !ok || len(digits) != len(data) && len(digits)+2 != len(data) {
		// The decoder adds the field's name to this error.
		return &json.UnmarshalTypeError{Value: string(data), Type: reflect.TypeFor[int]()}
	}
	*n = intOrString(v)
	return nil
}

// parseInt is strconv.ParseInt(string(b), 10, bits) reporting success
// only. The numbers VK sends (up to 18 digits) are read from b in place:
// the string conversion would allocate on every field of every message,
// since ParseInt's error keeps the string. Longer ones go to ParseInt.
func parseInt(b []byte, bits int) (int64, bool) {
	digits := b
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		v, err := strconv.ParseInt(string(b), 10, bits)
		return v, err == nil
	}
	var v int64 // 18 digits cannot overflow
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if b[0] == '-' {
		v = -v
	}
	if bits < 64 && (v < -1<<(bits-1) || v > 1<<(bits-1)-1) {
		return 0, false
	}
	return v, true
}

// looseBool is true for JSON true, 1 or "1", false for anything else.
type looseBool bool

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (b *looseBool) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "true", "1", `"1"`:
		*b = true
	default:
		*b = false
	}
	return nil
}

// wireAction is the type of a message's action: VK sends an object
// {"type": "chat_invite_user", ...}. null and an empty value read as no
// action; anything else present (an object without a type, a bare string)
// still marks a service message.
type wireAction string

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (a *wireAction) UnmarshalJSON(data []byte) error {
	var v struct {
		Type looseString `json:"type"`
	}
	var s string
	switch {
	case string(data) == "null", string(data) == `""`, string(data) == "{}":
		*a = ""
	case json.Unmarshal(data, &v) == nil && v.Type != "":
		*a = wireAction(v.Type)
	case json.Unmarshal(data, &s) == nil:
		*a = wireAction(s)
	default:
		*a = "unknown"
	}
	return nil
}

// looseString is a string read from a JSON string. Any other value reads
// as "".
type looseString string

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (s *looseString) UnmarshalJSON(data []byte) error {
	var v string
	if json.Unmarshal(data, &v) != nil {
		v = ""
	}
	*s = looseString(v)
	return nil
}
