package callback

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// The message's fields, by their index in messageFields.
const (
	msgMessage = iota // the 5.103+ shape's message, in the object
	msgID
	msgConversationMessageID
	msgPeerID
	msgFromID
	msgOut
	msgAction
	msgText
	msgAttachments
)

// messageFields are the fields of a VK message object that the bot reads.
// Every other field is skipped unread, so a change in its type can never
// turn a real message into an error. The numbers the bot reads are taken
// from a JSON integer or a string holding one (null leaves them as they
// were); any other value in one of these fields is an error, as is a text
// that is not a string.
var messageFields = []string{
	msgMessage: "message", msgID: "id", msgConversationMessageID: "conversation_message_id",
	msgPeerID: "peer_id", msgFromID: "from_id", msgOut: "out", msgAction: "action", msgText: "text",
	msgAttachments: "attachments",
}

// message decodes the object of a message_new event in either shape: since
// API 5.103 {"message": {...}, "client_info": {...}}; before that the
// message itself. One pass reads both; when "message" is present, it is
// the message. The error says what is wrong in words safe to show the
// sender.
func (d *decoder) message(object *fastjson.Value) (Message, error) {
	if object == nil {
		// Not "unexpected end of JSON input", which reads like a body cut
		// short: the body was whole, the field is missing.
		return Message{}, errors.New(`message_new object: the event has no "object" field (VK sends the message in it)`)
	}
	if object.GetObject() == nil {
		if kind, _ := d.read(object); kind != kindNull {
			return Message{}, fmt.Errorf("message_new object: cannot unmarshal %s into object", kindNames[kind])
		}
	}
	var (
		flat, nested Message
		hasNested    bool
	)
	if err := d.messageFields(object.GetObject(), &flat, &nested, &hasNested); err != nil {
		return Message{}, fmt.Errorf("message_new object: %w", err)
	}
	m := flat
	if hasNested {
		m = nested
	}
	if m.PeerID <= 0 {
		return Message{}, errors.New("message_new object: no usable peer_id")
	}
	return m, nil
}

// messageFields decodes the object o (nil for null) into m. When nested
// is not nil, a "message" field of o is decoded into nested, as
// encoding/json decodes a pointer field: null unsets it, an object is read
// into what an earlier one left.
func (d *decoder) messageFields(o *fastjson.Object, m, nested *Message, hasNested *bool) error {
	prefix := ""
	if nested == nil {
		prefix = "message."
	}
	var err error
	o.Visit(func(key []byte, v *fastjson.Value) {
		i := fieldIndex(key, messageFields)
		if err != nil || i < 0 || i == msgMessage && nested == nil {
			return
		}
		name := messageFields[i]
		switch i {
		case msgMessage:
			if kind, _ := d.read(v); kind == kindNull {
				*nested, *hasNested = Message{}, false
				return
			} else if kind != kindObject {
				err = typeError("message", kind, "object")
				return
			}
			if !*hasNested {
				*nested, *hasNested = Message{}, true
			}
			err = d.messageFields(v.GetObject(), nested, nil, nil)
			return
		case msgAction:
			m.Action = d.action(v)
			return
		case msgAttachments:
			m.Attachments, err = d.attachments(v, prefix, name)
			return
		}
		kind, text := d.read(v)
		switch i {
		case msgOut:
			m.Out = kind == kindTrue || string(text) == "1" && (kind == kindNumber || kind == kindString)
		case msgText:
			switch kind {
			case kindNull:
			case kindString:
				m.Text = string(d.unquote(text))
			default:
				err = typeError(prefix+name, kind, "string")
			}
		default: // the numbers
			var n int
			n, err = intOrString(prefix, name, kind, text)
			if err == nil && kind != kindNull {
				*intField(m, i) = n
			}
		}
	})
	return err
}

// intField returns the number field of m with index i in messageFields.
func intField(m *Message, i int) *int {
	switch i {
	case msgID:
		return &m.ID
	case msgConversationMessageID:
		return &m.ConversationMessageID
	case msgPeerID:
		return &m.PeerID
	}
	return &m.FromID
}

// intOrString reads an int from a JSON integer or from a string holding
// one as sent (escapes not decoded), so that VK sending a number as a
// string does not reject a message. null reads as 0; any other value is
// an error, naming the field prefix+name.
func intOrString(prefix, name string, kind byte, text []byte) (int, error) {
	switch kind {
	case kindNull:
		return 0, nil
	case kindNumber, kindString:
		if n, ok := parseInt(text, strconv.IntSize); ok {
			return int(n), nil
		}
		return 0, valueError(prefix+name, kind, text, "int")
	}
	return 0, typeError(prefix+name, kind, "int")
}

var actionFields = []string{"type"}

// action reads the type of a message's action: VK sends an object
// {"type": "chat_invite_user", ...}. null and an empty value read as no
// action; anything else present (an object without a type, a bare string)
// still marks a service message, "unknown" when it names none.
func (d *decoder) action(v *fastjson.Value) string {
	kind, text := d.read(v)
	switch kind {
	case kindString:
		return string(d.unquote(text))
	case kindNull:
		return ""
	case kindObject:
	default:
		return "unknown"
	}
	o := v.GetObject()
	if o.Len() == 0 {
		return ""
	}
	typ := ""
	o.Visit(func(key []byte, v *fastjson.Value) {
		if fieldIndex(key, actionFields) == 0 {
			typ = d.looseString(v)
		}
	})
	if typ == "" {
		return "unknown"
	}
	return typ
}

// looseString reads a string; any other value reads as "".
func (d *decoder) looseString(v *fastjson.Value) string {
	if kind, text := d.read(v); kind == kindString {
		return string(d.unquote(text))
	}
	return ""
}

// looseInt reads an int64 from a JSON integer or a string holding one as
// sent. Any other value reads as 0.
func (d *decoder) looseInt(v *fastjson.Value) int64 {
	if kind, text := d.read(v); kind == kindNumber || kind == kindString {
		if n, ok := parseInt(text, 64); ok {
			return n
		}
	}
	return 0
}

// attachments reads a message's attachments, the field prefix+name: null
// or an array of {"type": T, T: {...}}.
func (d *decoder) attachments(v *fastjson.Value, prefix, name string) ([]Attachment, error) {
	kind, _ := d.read(v)
	switch kind {
	case kindNull:
		return nil, nil
	case kindArray:
	default:
		return nil, typeError(prefix+name, kind, "array")
	}
	elems := v.GetArray()
	if len(elems) == 0 {
		return nil, nil
	}
	as := make([]Attachment, len(elems))
	for i, e := range elems {
		if err := d.attachment(e, &as[i]); err != nil {
			return nil, err
		}
	}
	return as, nil
}

// attachment reads one attachment into a. Only the element and its type
// must be well-formed; the object under T is read leniently
// (attachmentBody). Keys are matched exactly, as in a map.
func (d *decoder) attachment(v *fastjson.Value, a *Attachment) error {
	o := v.GetObject()
	if o == nil {
		if kind, _ := d.read(v); kind != kindNull {
			return typeError("attachment", kind, "object")
		}
		return nil
	}
	// As in a map, the last of duplicate keys is the one read.
	var typeValue, body *fastjson.Value
	o.Visit(func(key []byte, v *fastjson.Value) {
		if string(key) == "type" {
			typeValue = v
		}
	})
	typ := ""
	if typeValue != nil {
		switch kind, text := d.read(typeValue); kind {
		case kindNull:
		case kindString:
			typ = string(d.unquote(text))
		default:
			return typeError("attachment type", kind, "string")
		}
	}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if d.keyIs(key, typ) {
			body = v
		}
	})
	// Only a link is its URL: the URLs of docs, audio messages and the like
	// carry per-request signatures and would make the same file look new.
	*a = d.attachmentBody(body.GetObject(), typ == "link")
	a.Type = typ
	return nil
}

// keyIs reports whether key, as fastjson decoded it, is s as encoding/json
// would have decoded it: with each byte of invalid UTF-8 as U+FFFD.
func (d *decoder) keyIs(key []byte, s string) bool {
	if utf8.Valid(key) {
		return string(key) == s
	}
	d.str = appendValidUTF8(d.str[:0], key)
	return string(d.str) == s
}

// appendValidUTF8 appends b to dst with each byte of invalid UTF-8 replaced
// by U+FFFD, as encoding/json does (strings.ToValidUTF8 would replace a run
// of them by one).
func appendValidUTF8(dst, b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, r)
		} else {
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}

var bodyFields = []string{"id", "owner_id", "to_id", "sticker_id", "url"}

// attachmentBody reads what identifies an attached object. Attachment
// types differ (a sticker has no id, some newer types use string ids), so
// every field accepts any JSON value and keeps only what it can use. The
// owner of a wall post in message attachments may be its to_id. The URL is
// read only when withURL.
func (d *decoder) attachmentBody(o *fastjson.Object, withURL bool) Attachment {
	var a Attachment
	var toID int64
	o.Visit(func(key []byte, v *fastjson.Value) {
		switch fieldIndex(key, bodyFields) {
		case 0:
			a.ID = d.looseInt(v)
		case 1:
			a.OwnerID = d.looseInt(v)
		case 2:
			toID = d.looseInt(v)
		case 3:
			a.StickerID = d.looseInt(v)
		case 4:
			if withURL {
				a.URL = d.looseString(v)
			}
		}
	})
	if a.OwnerID == 0 {
		a.OwnerID = toID
	}
	return a
}
