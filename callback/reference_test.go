package callback

// The decoder this package had before fastjson, kept as the reference that
// the fastjson decoder is compared with (FuzzDecodeMatchesReference): it is
// encoding/json's reading of the same types, so it defines the behaviour to
// keep. It is not used outside tests.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/SevereCloud/vksdk/v2/events"
)

// refEnvelope holds the fields of vksdk's GroupEvent the handler reads. The
// API version ("v") is not among them: it is skipped unread, so a change
// in its type cannot fail the decoding, and it costs nothing.
type refEnvelope struct {
	Type    refEventType    `json:"type"`
	Object  json.RawMessage `json:"object"`
	GroupID int             `json:"group_id"`
	EventID string          `json:"event_id"`
	Secret  string          `json:"secret"`
}

// refEventType is an event's type. The one the bot counts is read as the
// constant, without allocating a copy; the others as any string.
type refEventType events.EventType

// refMessageNewJSON is the type of a message_new event as VK writes it.
const refMessageNewJSON = `"` + string(events.EventMessageNew) + `"`

// UnmarshalJSON implements json.Unmarshaler.
func (t *refEventType) UnmarshalJSON(data []byte) error {
	if string(data) == refMessageNewJSON {
		*t = refEventType(events.EventMessageNew)
		return nil
	}
	return json.Unmarshal(data, (*events.EventType)(t))
}

// refWireMessage holds the fields of a VK message object that the bot reads.
// Every other field is skipped unread, so a change in its type can never
// turn a real message into an error. The numbers the bot reads are taken
// from a JSON integer or a string holding one; any other type in one of
// these fields is an error, as is a text that is not a string.
type refWireMessage struct {
	ID                    refIntOrString      `json:"id"`
	ConversationMessageID refIntOrString      `json:"conversation_message_id"`
	PeerID                refIntOrString      `json:"peer_id"`
	FromID                refIntOrString      `json:"from_id"`
	Out                   refLooseBool        `json:"out"`
	Action                refWireAction       `json:"action"`
	Text                  string              `json:"text"`
	Attachments           []refWireAttachment `json:"attachments"`
}

// refMessageNewObject is the object of a message_new event in either shape:
// since API 5.103 {"message": {...}, "client_info": {...}}; before that the
// message itself. client_info is not declared, so it is never decoded. One
// pass decodes both; when "message" is present, it is the message.
type refMessageNewObject struct {
	Message *refWireMessage `json:"message"`
	refWireMessage
}

// refDecodeMessage decodes the object of a message_new event. The error says
// what is wrong in words safe to show the sender.
func refDecodeMessage(object json.RawMessage) (Message, error) {
	var obj refMessageNewObject
	if err := json.Unmarshal(object, &obj); err != nil {
		return Message{}, fmt.Errorf("message_new object: %w", err)
	}
	wm := &obj.refWireMessage
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

// refWireAttachment is one element of a message's attachments:
// {"type": T, T: {...}}. Only type must be well-formed; the object under T
// is read leniently (see refAttachmentBody).
type refWireAttachment Attachment

// UnmarshalJSON decodes one attachment. It fails only if the element is not
// an object or its type is not a string.
func (a *refWireAttachment) UnmarshalJSON(data []byte) error {
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
	var body refAttachmentBody
	if raw := fields[typ]; len(raw) > 0 && raw[0] == '{' {
		// Cannot fail: the raw value is a valid object and every field of
		// refAttachmentBody accepts any JSON value.
		_ = json.Unmarshal(raw, &body)
	}
	owner := body.OwnerID
	if owner == 0 {
		owner = body.ToID
	}
	*a = refWireAttachment{
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

// refAttachmentBody holds what identifies an attached object. Attachment types
// differ (a sticker has no id, some newer types use string ids), so every
// field accepts any JSON value and keeps only what it can use.
type refAttachmentBody struct {
	ID        refLooseInt    `json:"id"`
	OwnerID   refLooseInt    `json:"owner_id"`
	ToID      refLooseInt    `json:"to_id"` // the owner of a wall post in message attachments
	StickerID refLooseInt    `json:"sticker_id"`
	URL       refLooseString `json:"url"`
}

// refLooseInt is an int64 read from a JSON integer or a string holding one.
// Any other value reads as 0.
type refLooseInt int64

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (n *refLooseInt) UnmarshalJSON(data []byte) error {
	v, ok := parseInt(bytes.Trim(data, `"`), 64)
	if !ok {
		v = 0
	}
	*n = refLooseInt(v)
	return nil
}

// refIntOrString is an int read from a JSON integer or from a string holding
// one, so that VK sending a number as a string does not reject a message.
// null reads as 0; any other value is an error.
type refIntOrString int

// UnmarshalJSON implements json.Unmarshaler.
func (n *refIntOrString) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	digits := bytes.Trim(data, `"`)
	v, ok := parseInt(digits, strconv.IntSize)
	if !ok || len(digits) != len(data) && len(digits)+2 != len(data) {
		// The decoder adds the field's name to this error.
		return &json.UnmarshalTypeError{Value: string(data), Type: reflect.TypeFor[int]()}
	}
	*n = refIntOrString(v)
	return nil
}

// refLooseBool is true for JSON true, 1 or "1", false for anything else.
type refLooseBool bool

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (b *refLooseBool) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "true", "1", `"1"`:
		*b = true
	default:
		*b = false
	}
	return nil
}

// refWireAction is the type of a message's action: VK sends an object
// {"type": "chat_invite_user", ...}. null and an empty value read as no
// action; anything else present (an object without a type, a bare string)
// still marks a service message.
type refWireAction string

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (a *refWireAction) UnmarshalJSON(data []byte) error {
	var v struct {
		Type refLooseString `json:"type"`
	}
	var s string
	switch {
	case string(data) == "null", string(data) == `""`, string(data) == "{}":
		*a = ""
	case json.Unmarshal(data, &v) == nil && v.Type != "":
		*a = refWireAction(v.Type)
	case json.Unmarshal(data, &s) == nil:
		*a = refWireAction(s)
	default:
		*a = "unknown"
	}
	return nil
}

// refLooseString is a string read from a JSON string. Any other value reads
// as "".
type refLooseString string

// UnmarshalJSON implements json.Unmarshaler and never fails.
func (s *refLooseString) UnmarshalJSON(data []byte) error {
	var v string
	if json.Unmarshal(data, &v) != nil {
		v = ""
	}
	*s = refLooseString(v)
	return nil
}

// refDecodeEnvelope decodes the refEnvelope of an event. Unmarshal copies what
// it keeps (strings, the raw object), so data can be reused once it
// returns.
func refDecodeEnvelope(data []byte) (refEnvelope, error) {
	var env refEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return refEnvelope{}, fmt.Errorf("event envelope: %w", err)
	}
	if env.Type == "" {
		return refEnvelope{}, errors.New("event envelope: no type")
	}
	return env, nil
}
