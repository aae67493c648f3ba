package callback

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/SevereCloud/vksdk/v2/events"
)

// decoded is what a decoder made of one body: the envelope's fields, and
// the message read from its object whatever the event's type.
type decoded struct {
	envErr  error
	typ     events.EventType
	groupID int
	eventID string
	secret  string
	msgErr  error
	msg     Message
}

// decodeNew decodes data as the handler does.
func decodeNew(data []byte) decoded {
	d := getDecoder()
	defer d.release()
	env, err := d.decodeEnvelope(data)
	if err != nil {
		return decoded{envErr: err}
	}
	out := decoded{typ: env.typ, groupID: env.groupID, eventID: env.eventID, secret: string(env.secret)}
	out.msg, out.msgErr = d.message(env.object)
	return out
}

// decodeReference decodes data with the encoding/json decoder this
// package had before.
func decodeReference(data []byte) decoded {
	env, err := refDecodeEnvelope(data)
	if err != nil {
		return decoded{envErr: err}
	}
	out := decoded{typ: events.EventType(env.Type), groupID: env.GroupID, eventID: env.EventID, secret: env.Secret}
	out.msg, out.msgErr = refDecodeMessage(env.Object)
	return out
}

// The corners where the decoders differ on purpose (see decode.go).
var (
	// blankEmptyObject finds an empty object with blanks inside.
	blankEmptyObject = regexp.MustCompile(`\{[ \t\r\n]+\}`)
	// surrogateEscape finds a \u escape of a surrogate.
	surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
)

// compareDecoders fails t if the decoders disagree on data, other than in
// the corners decode.go lists.
func compareDecoders(t *testing.T, data []byte) {
	t.Helper()
	got, want := decodeNew(data), decodeReference(data)

	if (got.envErr != nil) != (want.envErr != nil) {
		if want.envErr == nil && strings.Contains(got.envErr.Error(), "unreadable JSON") {
			return // nested deeper than fastjson reads
		}
		t.Fatalf("%q:\nenvelope error %v\nreference      %v", data, got.envErr, want.envErr)
	}
	if want.envErr != nil {
		if _, ok := errors.AsType[*json.SyntaxError](want.envErr); ok && got.envErr.Error() != want.envErr.Error() {
			t.Fatalf("%q: syntax error %q, reference %q", data, got.envErr, want.envErr)
		}
		return
	}
	if got.typ != want.typ || got.groupID != want.groupID || got.eventID != want.eventID || got.secret != want.secret {
		t.Fatalf("%q:\nenvelope  %q %d %q %q\nreference %q %d %q %q", data,
			got.typ, got.groupID, got.eventID, got.secret, want.typ, want.groupID, want.eventID, want.secret)
	}
	if (got.msgErr != nil) != (want.msgErr != nil) {
		t.Fatalf("%q:\nmessage error %v\nreference     %v", data, got.msgErr, want.msgErr)
	}
	if got.msgErr != nil {
		return
	}
	if got.msg.Action != want.msg.Action && got.msg.Action == "" && want.msg.Action == "unknown" && blankEmptyObject.Match(data) {
		want.msg.Action = ""
	}
	if !reflect.DeepEqual(got.msg.Attachments, want.msg.Attachments) && surrogateEscape.Match(data) {
		want.msg.Attachments = got.msg.Attachments
	}
	if !reflect.DeepEqual(got.msg, want.msg) {
		t.Fatalf("%q:\nmessage   %+v\nreference %+v", data, got.msg, want.msg)
	}

	// DecodeEvent and Event.Message, the long poll's path, read the same.
	ev, err := DecodeEvent(data)
	if err != nil {
		t.Fatalf("%q: DecodeEvent: %v", data, err)
	}
	ev.Type = events.EventMessageNew
	m, err := ev.Message()
	if err != nil {
		t.Fatalf("%q: Event.Message: %v", data, err)
	}
	m.GroupID, m.EventID = 0, ""
	if !reflect.DeepEqual(m, got.msg) {
		t.Fatalf("%q:\nEvent.Message %+v\nwebhook       %+v", data, m, got.msg)
	}
}

// edgeBodies are bodies on the edges of what the decoders read. Each is
// compared with the reference, and seeds the fuzz target.
var edgeBodies = []string{
	// Not an object, or not JSON.
	``, ` `, `null`, `[]`, `"x"`, `1`, `true`, `{} {}`, `{"type":"x"} x`, `{"type":"x"}` + "\n\t ",
	"\xef\xbb\xbf{}", `{`, `{"type":`, `{"type":"x",}`, `{"type" "x"}`, `{'type':"x"}`,
	// Tokens fastjson's parser takes and encoding/json does not.
	`{"type":"x","a":01}`, `{"type":"x","a":1.2.3}`, `{"type":"x","a":1-2}`, `{"type":"x","a":-}`,
	`{"type":"x","a":+1}`, `{"type":"x","a":.5}`, `{"type":"x","a":1.}`, `{"type":"x","a":1e}`,
	`{"type":"x","a":1e+}`, `{"type":"x","a":nan}`, `{"type":"x","a":NaN}`, `{"type":"x","a":inf}`,
	`{"type":"x","a":-Inf}`, `{"type":"x","a":tru}`, `{"type":"x","a":nul}`, `{"type":"x","a":nullx}`,
	"{\"type\":\"x\",\"a\":\"\x01\"}", "{\"type\":\"x\",\"a\":\"\x01\\n\"}", "{\"type\":\"x\",\"a\x1f\\n\":1}",
	`{"type":"x","a":"\q"}`, `{"type":"x","a":"\u12"}`, `{"type":"x","a":"\u12g4"}`, `{"type":"x","a":"\'"}`,
	`{"type":"x","a":-0.0e-0,"b":1E+9,"c":[1,[2,{"d":null}]]}`,
	`{"type":"x","a":` + strings.Repeat("[", 299) + strings.Repeat("]", 299) + `}`,
	`{"type":"x","a":` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `}`,
	// The envelope.
	`{"type":null}`, `{"type":""}`, `{"type":1}`, `{"type":{}}`, `{"type":[]}`, `{"type":"x","type":null}`,
	`{"type":"x","TYPE":"y"}`, `{"Type":"message_new","Group_ID":5,"EVENT_ID":"e","\u017fecret":"s"}`,
	`{"type":"x","group_id":1e3}`, `{"type":"x","group_id":1.0}`, `{"type":"x","group_id":-0}`,
	`{"type":"x","group_id":"5"}`, `{"type":"x","group_id":null}`, `{"type":"x","group_id":5,"group_id":null}`,
	`{"type":"x","group_id":9223372036854775807}`, `{"type":"x","group_id":9223372036854775808}`,
	`{"type":"x","group_id":true}`, `{"type":"x","group_id":[]}`, `{"type":"x","secret":42}`,
	`{"type":"x","secret":"a\u0000b","event_id":"\ud83d\ude00"}`, `{"type":"x","secret":"a","secret":"b"}`,
	`{"type":"x","event_id":{}}`, `{"type":"confirmation","v":{"x":[1]},"object":7}`,
	`{"type":"\u006dessage_new"}`, `{"ty\u0070e":"x"}`,
	// The message object.
	`{"type":"x","object":null}`, `{"type":"x","object":"hi"}`, `{"type":"x","object":[]}`, `{"type":"x","object":5}`,
	`{"type":"x","object":{}}`, `{"type":"x","object":{"message":null,"peer_id":3}}`,
	`{"type":"x","object":{"message":{"peer_id":1,"text":"a"},"message":{"text":"b"}}}`,
	`{"type":"x","object":{"message":{"peer_id":1,"text":"a"},"message":null,"message":{"text":"b"}}}`,
	`{"type":"x","object":{"message":{"peer_id":1},"peer_id":2}}`, `{"type":"x","object":{"message":[]}}`,
	`{"type":"x","object":{"message":"m"}}`, `{"type":"x","object":{"message":{"message":{"peer_id":1}}}}`,
	`{"type":"x","object":{"MESSAGE":{"PEER_ID":4,"Text":"t"}}}`,
	`{"type":"x","object":{"peer_id":1,"peer_id":2}}`, `{"type":"x","object":{"peer_id":1,"peer_id":null}}`,
	`{"type":"x","object":{"peer_id":null}}`, `{"type":"x","object":{"peer_id":"12"}}`,
	`{"type":"x","object":{"peer_id":"\u0031"}}`, `{"type":"x","object":{"peer_id":"+5"}}`,
	`{"type":"x","object":{"peer_id":""}}`, `{"type":"x","object":{"peer_id":" 1"}}`,
	`{"type":"x","object":{"peer_id":1e3}}`, `{"type":"x","object":{"peer_id":1.0}}`,
	`{"type":"x","object":{"peer_id":9223372036854775808}}`, `{"type":"x","object":{"peer_id":1,"id":true}}`,
	`{"type":"x","object":{"peer_id":1,"from_id":[]}}`, `{"type":"x","object":{"peer_id":1,"from_id":{}}}`,
	`{"type":"x","object":{"peer_id":1,"out":1}}`, `{"type":"x","object":{"peer_id":1,"out":"1"}}`,
	`{"type":"x","object":{"peer_id":1,"out":true,"out":null}}`, `{"type":"x","object":{"peer_id":1,"out":1.0}}`,
	`{"type":"x","object":{"peer_id":1,"out":"true"}}`, `{"type":"x","object":{"peer_id":1,"out":"\u0031"}}`,
	`{"type":"x","object":{"peer_id":1,"text":1}}`, `{"type":"x","object":{"peer_id":1,"text":"a","text":null}}`,
	`{"type":"x","object":{"peer_id":1,"text":{}}}`, `{"type":"x","object":{"peer_id":1,"text":"a","text":[]}}`,
	// Strings as encoding/json decodes them.
	"{\"type\":\"x\",\"object\":{\"peer_id\":1,\"text\":\"\xff\xfe a \xed\xa0\x80 b \xe2\x82 c \xc0\xaf\"}}",
	`{"type":"x","object":{"peer_id":1,"text":"\u0000 \ud83d\ude00 \ud83d \ude00 \ud83d\u0041 \ud83d\ud83d\ude00 \udbff\udfff"}}`,
	`{"type":"x","object":{"peer_id":1,"text":"\"\\\/\b\f\n\r\t \u00e9 \u212a \uFFFD \ud83d"}}`,
	// Actions.
	`{"type":"x","object":{"peer_id":1,"action":{}}}`, `{"type":"x","object":{"peer_id":1,"action":{ }}}`,
	`{"type":"x","object":{"peer_id":1,"action":""}}`, `{"type":"x","object":{"peer_id":1,"action":null}}`,
	`{"type":"x","object":{"peer_id":1,"action":{"type":null}}}`, `{"type":"x","object":{"peer_id":1,"action":{"type":""}}}`,
	`{"type":"x","object":{"peer_id":1,"action":{"type":"a","type":""}}}`,
	`{"type":"x","object":{"peer_id":1,"action":{"TYPE":"a"}}}`, `{"type":"x","object":{"peer_id":1,"action":{"type":7}}}`,
	`{"type":"x","object":{"peer_id":1,"action":[]}}`, `{"type":"x","object":{"peer_id":1,"action":5}}`,
	`{"type":"x","object":{"peer_id":1,"action":true}}`, `{"type":"x","object":{"peer_id":1,"action":"\u0000"}}`,
	`{"type":"x","object":{"peer_id":1,"action":"a","action":{"type":"b"}}}`,
	// Attachments.
	`{"type":"x","object":{"peer_id":1,"attachments":null}}`, `{"type":"x","object":{"peer_id":1,"attachments":[]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":{}}}`, `{"type":"x","object":{"peer_id":1,"attachments":"a"}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[1]}}`, `{"type":"x","object":{"peer_id":1,"attachments":[null,[]]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":1,"type":"photo","photo":{"id":1}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"photo","type":1}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"photo","photo":{"id":1},"photo":{"owner_id":2}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"photo","photo":{"id":1},"photo":5}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"TYPE":"photo","photo":{"id":1}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"photo","Photo":{"id":1}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"ph\u006fto","photo":{"ID":1,"Owner_Id":"-2"}}]}}`,
	"{\"type\":\"x\",\"object\":{\"peer_id\":1,\"attachments\":[{\"type\":\"\xff\",\"\xff\":{\"id\":1}}]}}",
	`{"type":"x","object":{"peer_id":1,"attachments":[{"":{"id":3}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"w","w":{"id":1,"to_id":5,"owner_id":0}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"w","w":{"owner_id":3,"owner_id":null,"to_id":4}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"link","link":{"url":"u","url":null}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"link","link":{"URL":"a\u0000\ud800"}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"doc","doc":{"url":"u","id":"1e3","owner_id":"\u0031"}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"s","s":{"stic\u212aer_id":9,"sticker_id":"+9"}}]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"x"}],"attachments":[{"type":"y"},null]}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"x"}],"attachments":null}}`,
	`{"type":"x","object":{"peer_id":1,"attachments":[{"type":"x"}],"attachments":{}}}`,
	`{"type":"x","object":{"peer_id":1,"attachment\u017f":[{"type":"x"}]}}`,
}

func TestDecodeMatchesReference(t *testing.T) {
	for _, body := range edgeBodies {
		compareDecoders(t, []byte(body))
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		compareDecoders(t, b)
	}
}

// FuzzDecodeMatchesReference decodes arbitrary bodies with the fastjson
// decoder and with the encoding/json one it replaced: they must agree on
// every field and on whether the envelope and the message are refused.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, body := range edgeBodies {
		f.Add([]byte(body))
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(compareDecoders)
}

// TestDecodeMatchesReferenceGenerated compares the decoders on bodies
// built from the fields they read, with every kind of value in them,
// duplicate and case-folded keys, escapes, invalid UTF-8 and blanks, and
// some of them broken.
func TestDecodeMatchesReferenceGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		body := genBody(rng)
		switch rng.IntN(20) {
		case 0:
			body = body[:rng.IntN(len(body)+1)]
		case 1:
			i := rng.IntN(len(body) + 1)
			body = body[:i] + string(rune(rng.IntN(128))) + body[i:]
		}
		compareDecoders(t, []byte(body))
	}
}

var (
	genKeys = []string{
		"type", "object", "group_id", "event_id", "secret", "v", "message", "client_info",
		"id", "conversation_message_id", "peer_id", "from_id", "out", "action", "text", "attachments",
		"owner_id", "to_id", "sticker_id", "url", "photo", "link", "wall", "x", "",
		"TYPE", "Peer_ID", `pe\u0065r_id`, `\u017fecret`, `attachment\u017f`, `stic\u212aer_id`, "Photo",
		"\xff", `\ud800`, `ph\u006fto`, `\u0000`,
	}
	genStrings = []string{
		"message_new", "confirmation", "photo", "link", "wall", "x", "", "1", "42", "-7", "+5", "007", " 1",
		"1e3", `\u0031`, "chat_invite_user", "Vk7qR2xLmP9sT4wZ", "\xff\xfe", "\xed\xa0\x80", `\ud83d\ude00`,
		`\ud83d`, `\ud83d\u0041`, `a\"b\\c\/d\n`, "доброе утро", `\u212a`, "\xff", `\ud800`, "9223372036854775808",
	}
	genNumbers = []string{"0", "1", "-0", "10", "218245623", "2000000001", "-12345", "1e3", "1.5", "1E+2",
		"9223372036854775807", "9223372036854775808", "-9223372036854775809", "0.0"}
	genBlanks = []string{"", "", "", " ", "\n", "\t ", "\r\n"}
)

// genBody returns a message_new body whose fields are mostly of the
// right kind, so that most bodies reach the message's fields.
func genBody(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString(`{"type":"message_new","group_id":218245623,"object":`)
	message := func() {
		b.WriteString(`{"peer_id":10`)
		for range rng.IntN(8) {
			b.WriteString(",")
			genMessageField(rng, &b)
		}
		b.WriteString("}")
	}
	switch rng.IntN(4) {
	case 0: // flat
		message()
	case 1: // flat and nested
		b.WriteString(`{"peer_id":5,`)
		genMessageField(rng, &b)
		b.WriteString(`,"message":`)
		message()
		b.WriteString("}")
	default:
		b.WriteString(`{"message":`)
		message()
		if rng.IntN(4) == 0 {
			b.WriteString(`,"message":`)
			genValue(rng, &b, 1)
		}
		b.WriteString(`,"client_info":{}}`)
	}
	if rng.IntN(4) == 0 {
		b.WriteString(",")
		genMembers(rng, &b, 2)
	}
	b.WriteString(`}`)
	return b.String()
}

// genMessageField writes one member of a message object, its value
// mostly of the kind the field takes.
func genMessageField(rng *rand.Rand, b *strings.Builder) {
	keys := []string{"id", "conversation_message_id", "peer_id", "from_id", "out", "action", "text", "attachments"}
	key := keys[rng.IntN(len(keys))]
	if rng.IntN(8) == 0 {
		key = genKeys[rng.IntN(len(genKeys))]
	}
	b.WriteString(`"` + key + `":`)
	if rng.IntN(6) == 0 {
		genValue(rng, b, 2)
		return
	}
	switch key {
	case "action":
		switch rng.IntN(3) {
		case 0:
			b.WriteString(`"` + genStrings[rng.IntN(len(genStrings))] + `"`)
		default:
			b.WriteString("{")
			genMembers(rng, b, 1)
			b.WriteString("}")
		}
	case "attachments":
		b.WriteString("[")
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			typ := []string{"photo", "link", "wall", "sticker", "x", ""}[rng.IntN(6)]
			b.WriteString(`{"type":"` + typ + `","` + typ + `":{`)
			genMembers(rng, b, 1)
			b.WriteString("}")
			if rng.IntN(3) == 0 {
				b.WriteString(",")
				genMembers(rng, b, 1)
			}
			b.WriteString("}")
		}
		b.WriteString("]")
	case "text":
		b.WriteString(`"`)
		for range rng.IntN(4) {
			b.WriteString(genStrings[rng.IntN(len(genStrings))])
		}
		b.WriteString(`"`)
	default:
		if rng.IntN(3) == 0 {
			b.WriteString(`"` + genNumbers[rng.IntN(len(genNumbers))] + `"`)
		} else {
			b.WriteString(genNumbers[rng.IntN(len(genNumbers))])
		}
	}
}

func genValue(rng *rand.Rand, b *strings.Builder, depth int) {
	b.WriteString(genBlanks[rng.IntN(len(genBlanks))])
	k := rng.IntN(10)
	if depth <= 0 && k < 4 {
		k += 4
	}
	switch k {
	case 0, 1, 2:
		b.WriteByte('{')
		genMembers(rng, b, depth-1)
		b.WriteByte('}')
	case 3:
		b.WriteByte('[')
		for i := range rng.IntN(3) {
			if i > 0 {
				b.WriteByte(',')
			}
			genValue(rng, b, depth-1)
		}
		b.WriteByte(']')
	case 4, 5:
		b.WriteString(`"` + genStrings[rng.IntN(len(genStrings))] + `"`)
	case 6, 7:
		b.WriteString(genNumbers[rng.IntN(len(genNumbers))])
	case 8:
		b.WriteString([]string{"true", "false"}[rng.IntN(2)])
	default:
		b.WriteString("null")
	}
	b.WriteString(genBlanks[rng.IntN(len(genBlanks))])
}

func genMembers(rng *rand.Rand, b *strings.Builder, depth int) {
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + genKeys[rng.IntN(len(genKeys))] + `":`)
		genValue(rng, b, depth)
	}
}
