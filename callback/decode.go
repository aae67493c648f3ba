package callback

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/SevereCloud/vksdk/v2/events"
	"github.com/valyala/fastjson"
)

// The decoding of events: fastjson parses a body into a tree once, without
// allocating once its parser is warm, and the functions below read from it
// only the fields the bot uses, with the results encoding/json gives for
// the types this package declared before (kept in reference_test.go, and
// compared with this decoder by FuzzDecodeMatchesReference):
//   - a body encoding/json refuses is refused, in its words (syntaxError);
//   - keys match field names exactly or else case-insensitively
//     (fieldIndex), and the last of duplicate keys wins;
//   - strings are taken as sent when they need no decoding (no escape,
//     valid UTF-8), else decoded by encoding/json itself (unquote): each
//     invalid UTF-8 byte and each lone surrogate becomes U+FFFD;
//   - null leaves a number or string field as it was.
//
// Three corners differ, where fastjson keeps no trace of the text:
//   - JSON nested deeper than fastjson.MaxDepth (300) levels is refused
//     (encoding/json allows 10000); VK events nest a few levels;
//   - an action written as an empty object with blanks inside ({ }) reads
//     as no action, like {}; encoding/json's reading saw its raw bytes and
//     made it "unknown";
//   - object keys are decoded by fastjson, which leaves a lone surrogate
//     escape (\ud800) as it is where encoding/json puts U+FFFD. No field
//     name can match such a key either way, but in an attachment, where
//     the object is found under the key equal to its type, such a key may
//     match a type that encoding/json's would not, or the other way.

// A decoder reads events. It is not safe for concurrent use; decoders are
// pooled.
type decoder struct {
	p fastjson.Parser
	// size is the length of the last body parsed: a decoder that parsed a
	// large one is not pooled, so it does not pin that memory.
	size int
	raw  []byte // the text of the last value read
	str  []byte // the last string unquoted, when it had escapes
	// secret is the envelope's secret, unquoted; valid until the next parse.
	secret []byte
	// digest is the SHA-256 of secret once secretDigest has run. It lives
	// here because a slice of it passed to Handler.compare, a function
	// value, would move it from the stack to the heap on every request.
	digest [sha256.Size]byte
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

func getDecoder() *decoder { return decoders.Get().(*decoder) }

func (d *decoder) release() {
	if d.size > maxPooledBuffer || cap(d.raw) > maxPooledBuffer || cap(d.str) > maxPooledBuffer {
		return
	}
	decoders.Put(d)
}

// parse parses data, a whole JSON text. The value is valid until the next
// parse.
func (d *decoder) parse(data []byte) (*fastjson.Value, error) {
	d.size = len(data)
	v, err := d.p.ParseBytes(data)
	// fastjson checks the structure (brackets, commas, colons, literals)
	// but takes as a number any run of digits, signs, dots and exponents,
	// and NaN and Inf, and does not check escapes or control characters in
	// strings: encoding/json's scanner (pooled, no allocation) checks the
	// tokens.
	if err == nil && json.Valid(data) {
		return v, nil
	}
	return nil, syntaxError(data, err)
}

// syntaxError says why data, refused by parse, is not JSON. That is on the
// path of a malformed request only, so encoding/json's scanner can say it
// as it always did.
func syntaxError(data []byte, parseErr error) error {
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return err
	}
	if parseErr != nil { // valid JSON, but nested too deep for fastjson
		return fmt.Errorf("unreadable JSON: %w", parseErr)
	}
	return errors.New("invalid JSON") // not reached: json.Valid and json.Unmarshal agree
}

// Kinds of JSON values, named by the byte they start with (kindNumber
// stands for every number).
const (
	kindObject = '{'
	kindArray  = '['
	kindString = '"'
	kindNumber = '0'
	kindTrue   = 't'
	kindFalse  = 'f'
	kindNull   = 'n'
)

// kindNames names the kinds in errors, as encoding/json did.
var kindNames = map[byte]string{
	kindObject: "object", kindArray: "array", kindString: "string", kindNumber: "number",
	kindTrue: "bool", kindFalse: "bool", kindNull: "null",
}

// read returns v's kind and, for a string, its text between the quotes as
// sent (escapes not decoded), for a number its text. The text is valid
// until the next read. fastjson's own string accessors are never used:
// they decode escapes in place, in their own way.
func (d *decoder) read(v *fastjson.Value) (byte, []byte) {
	if v.GetObject() != nil {
		return kindObject, nil
	}
	if v.GetArray() != nil {
		return kindArray, nil
	}
	d.raw = v.MarshalTo(d.raw[:0]) // a scalar, or an empty array
	switch c := d.raw[0]; c {
	case '"':
		return kindString, d.raw[1 : len(d.raw)-1]
	case '[', 't', 'f', 'n':
		return c, nil
	}
	return kindNumber, d.raw
}

// unquote decodes the text of a JSON string as encoding/json does. The
// result is text itself when it needs no change (no escape, valid UTF-8:
// the usual case), else d.str, decoded by encoding/json itself (each
// invalid UTF-8 byte and each lone surrogate becomes U+FFFD).
func (d *decoder) unquote(text []byte) []byte {
	if bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text) {
		return text
	}
	quoted := append(append(append(d.str[:0], '"'), text...), '"')
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return text // not reached: the body passed json.Valid
	}
	d.str = append(quoted[:0], s...)
	return d.str
}

// fieldIndex returns the index of the name in names that key matches, as
// encoding/json matches a key to a struct field: exactly, or else
// bytes.EqualFold (under which the Kelvin sign is a k). -1 if none.
func fieldIndex(key []byte, names []string) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	for i, name := range names {
		if bytes.EqualFold(key, []byte(name)) {
			return i
		}
	}
	return -1
}

// typeError is a value of the wrong kind in field.
func typeError(field string, kind byte, want string) error {
	return fmt.Errorf("%s: cannot unmarshal %s into %s", field, kindNames[kind], want)
}

// valueError is a value of the right kind that does not fit field.
func valueError(field string, kind byte, text []byte, want string) error {
	const maxShown = 40
	if len(text) > maxShown {
		text = text[:maxShown]
	}
	if kind == kindString {
		return fmt.Errorf("%s: cannot unmarshal string %q into %s", field, text, want)
	}
	return fmt.Errorf("%s: cannot unmarshal %s %s into %s", field, kindNames[kind], text, want)
}

// envelope holds the fields of vksdk's GroupEvent the handler reads. The
// API version ("v") is not among them: it is skipped unread, so a change
// in its type cannot fail the decoding, and it costs nothing.
type envelope struct {
	typ     events.EventType
	object  *fastjson.Value // nil if absent
	groupID int
	eventID string
	secret  []byte // d.secret
}

// The envelope's fields, by their index in envelopeFields.
const (
	envType = iota
	envObject
	envGroupID
	envEventID
	envSecret
)

var envelopeFields = []string{envType: "type", envObject: "object", envGroupID: "group_id", envEventID: "event_id", envSecret: "secret"}

// envelope decodes the envelope of the event v.
func (d *decoder) envelope(v *fastjson.Value) (envelope, error) {
	var env envelope
	d.secret = d.secret[:0]
	o := v.GetObject()
	if o == nil {
		if kind, _ := d.read(v); kind != kindNull {
			return envelope{}, fmt.Errorf("event envelope: cannot unmarshal %s into object", kindNames[kind])
		}
	}
	var err error
	o.Visit(func(key []byte, v *fastjson.Value) {
		i := fieldIndex(key, envelopeFields)
		if err != nil || i < 0 {
			return
		}
		if i == envObject {
			env.object = v
			return
		}
		kind, text := d.read(v)
		switch {
		case kind == kindNull: // leaves the field as it was
		case i == envGroupID:
			if kind != kindNumber {
				err = typeError("group_id", kind, "int")
			} else if n, ok := parseInt(text, strconv.IntSize); ok {
				env.groupID = int(n)
			} else {
				err = valueError("group_id", kind, text, "int")
			}
		case kind != kindString:
			err = typeError(envelopeFields[i], kind, "string")
		case i == envType:
			env.typ = eventType(d.unquote(text))
		case i == envEventID:
			env.eventID = string(d.unquote(text))
		case i == envSecret:
			d.secret = append(d.secret[:0], d.unquote(text)...)
		}
	})
	if err != nil {
		return envelope{}, fmt.Errorf("event envelope: %w", err)
	}
	if env.typ == "" {
		return envelope{}, errors.New("event envelope: no type")
	}
	env.secret = d.secret
	return env, nil
}

// secretDigest returns the SHA-256 of the last envelope's secret.
func (d *decoder) secretDigest() []byte {
	d.digest = sha256.Sum256(d.secret)
	return d.digest[:]
}

// eventType returns b as an event type; the types the handler acts on are
// not copied.
func eventType(b []byte) events.EventType {
	switch events.EventType(b) {
	case events.EventMessageNew:
		return events.EventMessageNew
	case events.EventConfirmation:
		return events.EventConfirmation
	}
	return events.EventType(b)
}

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
		return Message{}, errors.New("message_new object: unexpected end of JSON input")
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
