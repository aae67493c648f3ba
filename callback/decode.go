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
	// strings: valid checks the whole text as encoding/json's scanner
	// does, in one pass.
	if err == nil && valid(data) {
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
