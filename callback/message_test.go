package callback_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/callback"
)

// handleOne posts body and returns the response and the one message passed
// on, if any.
func handleOne(t *testing.T, body string, header http.Header) (int, string, *callback.Message) {
	t.Helper()
	next := &recorder{}
	w := serve(mustHandler(t, next, callback.Options{}), request{body: body, header: header})
	msgs := next.messages()
	switch {
	case len(msgs) > 1:
		t.Fatalf("HandleMessage called %d times", len(msgs))
	case len(msgs) == 1:
		return w.Code, w.Body.String(), &msgs[0]
	}
	return w.Code, w.Body.String(), nil
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file     string
		wantBody string
		want     *callback.Message // nil: HandleMessage must not be called
	}{
		{"message_new_private.json", "ok", &callback.Message{
			GroupID: fixtureGroup, EventID: "5f2d0c7a9e41b3d8a6c05e17f93b2d4a8c6e1f07",
			ID: 1843, ConversationMessageID: 1027, PeerID: 385145727, FromID: 385145727,
			Text: "Привет! Сколько раз мне это уже писали?",
		}},
		{"message_new_chat.json", "ok", &callback.Message{
			GroupID: fixtureGroup, EventID: "a93e6b0d2f7c4e1a58b9d03c6e2f7a1b4d8c0e95",
			ID: 0, ConversationMessageID: 5312, PeerID: 2000000001, FromID: 527310964,
			Text: "доброе утро",
		}},
		{"message_new_sticker.json", "ok", &callback.Message{
			GroupID: fixtureGroup, EventID: "0c8d4f1e6a2b9d7e3f05a1c8b6e4d2f9a7c3e518",
			ID: 1845, ConversationMessageID: 1029, PeerID: 385145727, FromID: 385145727,
			Attachments: []callback.Attachment{{Type: "sticker", StickerID: 9012}},
		}},
		{"message_new_photo.json", "ok", &callback.Message{
			GroupID: fixtureGroup, EventID: "e7b1a4c90d3f6e28b5a7c1d4f0e9b3a6c8d2f147",
			ID: 1846, ConversationMessageID: 1030, PeerID: 385145727, FromID: 385145727,
			Text:        "закат на Неве",
			Attachments: []callback.Attachment{{Type: "photo", OwnerID: 385145727, ID: 457243091}},
		}},
		{"message_new_flat.json", "ok", &callback.Message{
			GroupID: fixtureGroup, EventID: "3b9f2e7d1c4a6b8e0f5d2c9a7e1b4d6f8a0c3e52",
			ID: 1201, ConversationMessageID: 640, PeerID: 385145727, FromID: 385145727,
			Text: "старый формат",
		}},
		{"confirmation.json", fixtureConfirmation, nil},
		{"unknown_type.json", "ok", nil},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".json"), func(t *testing.T) {
			status, body, got := handleOne(t, string(fixture(t, tt.file)), nil)
			if status != http.StatusOK || body != tt.wantBody {
				t.Fatalf("got %d %q, want 200 %q", status, body, tt.wantBody)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("message:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestTypeDrift changes fields the bot does not read to types other than
// VK's documented ones: the message must still be counted as it is.
func TestTypeDrift(t *testing.T) {
	private := string(fixture(t, "message_new_private.json"))
	flat := string(fixture(t, "message_new_flat.json"))
	tests := []struct {
		name string
		body string
	}{
		{"client_info is a string", replace(t, private, `"client_info": {`, `"client_info": "unsupported", "was_client_info": {`)},
		{"client_info is null", replace(t, private, `"client_info": {`, `"client_info": null, "was_client_info": {`)},
		{"client_info fields change type", replace(t, private, `"keyboard": true`, `"keyboard": {"v": 2}`)},
		{"payload is an object", replace(t, private, `"random_id": 0`, `"random_id": 0, "payload": {"command": "start"}`)},
		{"payload is a string", replace(t, private, `"random_id": 0`, `"random_id": 0, "payload": "{\"command\":\"start\"}"`)},
		{"geo is odd", replace(t, private, `"random_id": 0`, `"random_id": 0, "geo": {"type": "point", "coordinates": "59.9386 30.3141", "place": []}`)},
		{"geo is a string", replace(t, private, `"random_id": 0`, `"random_id": 0, "geo": "59.9386,30.3141"`)},
		{"important is a string", replace(t, private, `"important": false`, `"important": "no"`)},
		{"out is a bool", replace(t, private, `"out": 0`, `"out": false`)},
		{"fwd_messages is an object", replace(t, private, `"fwd_messages": []`, `"fwd_messages": {"count": 0}`)},
		{"reply_message is odd", replace(t, private, `"random_id": 0`, `"random_id": 0, "reply_message": [1, 2]`)},
		{"keyboard is a string", replace(t, private, `"random_id": 0`, `"random_id": 0, "keyboard": "{\"buttons\":[]}"`)},
		{"unknown fields", replace(t, private, `"random_id": 0`, `"random_id": 0, "is_unavailable": true, "reactions": [{"id": 1}], "future": {"deep": [null, {"x": 1.5e300}]}`)},
		{"unknown object fields", replace(t, private, `"client_info": {`, `"extra": [true], "client_info": {`)},
		{"date is a string", replace(t, private, `"date": 1718003401`, `"date": "2024-06-10"`)},
		{"date is missing", replace(t, private, `"date": 1718003401,`, ``)},
		{"v is a number", replace(t, private, `"v": "5.199"`, `"v": 5.199`)},
		{"v is an object", replace(t, private, `"v": "5.199"`, `"v": {"major": 5}`)},
		{"unknown envelope fields", replace(t, private, `"secret"`, `"ts": [1, 2], "secret"`)},
		{"compact", compact(t, private)},
		{"flat: payload is an object", replace(t, flat, `"random_id": 0`, `"random_id": 0, "payload": {"command": "start"}`)},
		{"flat: geo is odd", replace(t, flat, `"random_id": 0`, `"random_id": 0, "geo": 7`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, got := handleOne(t, tt.body, nil)
			if status != http.StatusOK || body != "ok" {
				t.Fatalf("got %d %q, want 200 ok", status, body)
			}
			if got == nil || got.PeerID != 385145727 || got.FromID != 385145727 {
				t.Fatalf("message not passed on intact: %+v", got)
			}
			if !strings.HasPrefix(tt.name, "flat") && got.Text != "Привет! Сколько раз мне это уже писали?" {
				t.Errorf("text = %q", got.Text)
			}
		})
	}
}

// TestNumbersAsStrings sends the numbers the bot reads as strings: the
// message is decoded as if they were numbers.
func TestNumbersAsStrings(t *testing.T) {
	private := string(fixture(t, "message_new_private.json"))
	body := private
	for _, f := range []string{`"peer_id": 385145727`, `"from_id": 385145727`, `"id": 1843`, `"conversation_message_id": 1027`} {
		name, num, _ := strings.Cut(f, ": ")
		body = replace(t, body, f, name+`: "`+num+`"`)
	}
	status, _, got := handleOne(t, body, nil)
	if status != http.StatusOK || got == nil {
		t.Fatalf("got %d, message %+v", status, got)
	}
	if got.PeerID != 385145727 || got.FromID != 385145727 || got.ID != 1843 || got.ConversationMessageID != 1027 {
		t.Errorf("numbers not read: %+v", got)
	}
}

// TestNotFromAPerson decodes what tells a message the bot must not answer:
// the author, the direction and chat service actions.
func TestNotFromAPerson(t *testing.T) {
	private := string(fixture(t, "message_new_private.json"))
	tests := []struct {
		name   string
		body   string
		from   int
		out    bool
		action string
	}{
		{"a person", private, 385145727, false, ""},
		{"a community", replace(t, private, `"from_id": 385145727`, `"from_id": -12345`), -12345, false, ""},
		{"outgoing", replace(t, private, `"out": 0`, `"out": 1`), 385145727, true, ""},
		{"outgoing as a bool", replace(t, private, `"out": 0`, `"out": true`), 385145727, true, ""},
		{"incoming as a bool", replace(t, private, `"out": 0`, `"out": false`), 385145727, false, ""},
		{"invite", replace(t, private, `"random_id": 0`, `"random_id": 0, "action": {"type": "chat_invite_user", "member_id": 5}`), 385145727, false, "chat_invite_user"},
		{"action as a string", replace(t, private, `"random_id": 0`, `"random_id": 0, "action": "chat_title_update"`), 385145727, false, "chat_title_update"},
		{"action without a type", replace(t, private, `"random_id": 0`, `"random_id": 0, "action": {"member_id": 5}`), 385145727, false, "unknown"},
		{"null action", replace(t, private, `"random_id": 0`, `"random_id": 0, "action": null`), 385145727, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, got := handleOne(t, tt.body, nil)
			if status != http.StatusOK || got == nil {
				t.Fatalf("got %d, message %+v", status, got)
			}
			if got.FromID != tt.from || got.Out != tt.out || got.Action != tt.action {
				t.Errorf("from %d out %v action %q, want %d %v %q", got.FromID, got.Out, got.Action, tt.from, tt.out, tt.action)
			}
		})
	}
}

// TestWrongTypeInUsedField changes a field the bot reads to a wrong type:
// that is not a message the bot can count, so it is a 400.
func TestWrongTypeInUsedField(t *testing.T) {
	private := string(fixture(t, "message_new_private.json"))
	sticker := string(fixture(t, "message_new_sticker.json"))
	tests := []struct {
		name string
		body string
		want string // in the response body
	}{
		{"peer_id is a float", replace(t, private, `"peer_id": 385145727`, `"peer_id": 385145727.5`), "peer_id"},
		{"from_id is an object", replace(t, private, `"from_id": 385145727`, `"from_id": {}`), "from_id"},
		{"peer_id is a word", replace(t, private, `"peer_id": 385145727`, `"peer_id": "me"`), "peer_id"},
		{"text is a number", replace(t, private, `"text": "Привет! Сколько раз мне это уже писали?"`, `"text": 42`), "text"},
		{"peer_id missing", replace(t, private, `"peer_id": 385145727`, `"peer": 1`), "no usable peer_id"},
		{"id is a bool", replace(t, private, `"id": 1843`, `"id": true`), "id"},
		{"attachments is an object", replace(t, private, `"attachments": []`, `"attachments": {}`), "attachments"},
		{"attachment is a number", replace(t, private, `"attachments": []`, `"attachments": [1]`), "attachment"},
		{"attachment type is a number", replace(t, sticker, `"type": "sticker"`, `"type": 7`), "attachment type"},
		{"message is an array", replace(t, private, `"message": {`, `"message": [], "was": {`), "message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, got := handleOne(t, tt.body, nil)
			if status != http.StatusBadRequest {
				t.Fatalf("got %d %q, want 400", status, body)
			}
			if !strings.HasPrefix(body, "bad request: message_new object: ") || !strings.Contains(body, tt.want) {
				t.Errorf("body = %q, want it to name %q", body, tt.want)
			}
			if got != nil {
				t.Errorf("HandleMessage called with %+v", got)
			}
		})
	}
}

func TestAttachments(t *testing.T) {
	tests := []struct {
		name        string
		attachments string
		want        []callback.Attachment
	}{
		{"none", `[]`, nil},
		{"null", `null`, nil},
		{"photo", `[{"type":"photo","photo":{"album_id":-3,"id":1,"owner_id":-2,"access_key":"k","sizes":[]}}]`,
			[]callback.Attachment{{Type: "photo", OwnerID: -2, ID: 1}}},
		{"sticker", `[{"type":"sticker","sticker":{"sticker_id":9,"product_id":1,"images":[{"url":"https://vk.com/sticker/1-9-64"}]}}]`,
			[]callback.Attachment{{Type: "sticker", StickerID: 9}}},
		{"link", `[{"type":"link","link":{"url":"https://example.org/a?b=c","title":"t","photo":{"id":5,"owner_id":6}}}]`,
			[]callback.Attachment{{Type: "link", URL: "https://example.org/a?b=c"}}},
		{"doc", `[{"type":"doc","doc":{"id":679110127,"owner_id":385145727,"title":"report.pdf","size":1024,"ext":"pdf","url":"https://vk.com/doc385145727_679110127"}}]`,
			[]callback.Attachment{{Type: "doc", OwnerID: 385145727, ID: 679110127}}},
		{"audio", `[{"type":"audio","audio":{"artist":"a","id":456239017,"owner_id":2000001234,"title":"t","duration":200}}]`,
			[]callback.Attachment{{Type: "audio", OwnerID: 2000001234, ID: 456239017}}},
		{"video", `[{"type":"video","video":{"id":456239104,"owner_id":-218245623,"title":"v","duration":31}}]`,
			[]callback.Attachment{{Type: "video", OwnerID: -218245623, ID: 456239104}}},
		{"audio_message", `[{"type":"audio_message","audio_message":{"duration":3,"id":677432198,"owner_id":385145727,"link_ogg":"https://psv4.userapi.com/a.ogg","waveform":[0,1,2]}}]`,
			[]callback.Attachment{{Type: "audio_message", OwnerID: 385145727, ID: 677432198}}},
		{"wall post with to_id", `[{"type":"wall","wall":{"id":1432,"from_id":-218245623,"to_id":-218245623,"text":"post"}}]`,
			[]callback.Attachment{{Type: "wall", OwnerID: -218245623, ID: 1432}}},
		{"wall post with owner_id", `[{"type":"wall","wall":{"id":1432,"from_id":1,"owner_id":-218245623,"to_id":5}}]`,
			[]callback.Attachment{{Type: "wall", OwnerID: -218245623, ID: 1432}}},
		{"unknown type keeps ids", `[{"type":"hologram","hologram":{"id":77,"owner_id":-3,"depth":{"m":1}}}]`,
			[]callback.Attachment{{Type: "hologram", OwnerID: -3, ID: 77}}},
		{"string ids", `[{"type":"artist","artist":{"id":"7395346637836095867","name":"n"}}]`,
			[]callback.Attachment{{Type: "artist", ID: 7395346637836095867}}},
		{"unusable ids are zero", `[{"type":"x","x":{"id":"abc","owner_id":1.5,"sticker_id":{}}}]`,
			[]callback.Attachment{{Type: "x"}}},
		{"link url not a string", `[{"type":"link","link":{"url":3}}]`, []callback.Attachment{{Type: "link"}}},
		{"int64 overflow is zero", `[{"type":"x","x":{"id":9223372036854775808,"owner_id":-9223372036854775808}}]`,
			[]callback.Attachment{{Type: "x", OwnerID: -9223372036854775808}}},
		{"no payload", `[{"type":"call"}]`, []callback.Attachment{{Type: "call"}}},
		{"payload not an object", `[{"type":"gift","gift":[1,2]},{"type":"poll","poll":"p"},{"type":"story","story":null}]`,
			[]callback.Attachment{{Type: "gift"}, {Type: "poll"}, {Type: "story"}}},
		{"no type", `[{"photo":{"id":1,"owner_id":2}}]`, []callback.Attachment{{}}},
		{"null element", `[null]`, []callback.Attachment{{}}},
		{"several, in order", `[{"type":"photo","photo":{"id":1,"owner_id":2}},{"type":"sticker","sticker":{"sticker_id":3}},{"type":"photo","photo":{"id":4,"owner_id":5}}]`,
			[]callback.Attachment{{Type: "photo", OwnerID: 2, ID: 1}, {Type: "sticker", StickerID: 3}, {Type: "photo", OwnerID: 5, ID: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			object := `{"message":{"peer_id":10,"from_id":10,"text":"","attachments":` + tt.attachments + `}}`
			status, body, got := handleOne(t, event("message_new", fixtureGroup, fixtureSecret, object), nil)
			if status != http.StatusOK {
				t.Fatalf("got %d %q, want 200", status, body)
			}
			if got == nil {
				t.Fatal("HandleMessage not called")
			}
			if !reflect.DeepEqual(got.Attachments, tt.want) {
				t.Errorf("attachments:\n got %+v\nwant %+v", got.Attachments, tt.want)
			}
		})
	}
}

func TestRetryCounter(t *testing.T) {
	tests := []struct {
		name   string
		header []string // nil: no header
		want   int
	}{
		{"absent", nil, 0},
		{"empty", []string{""}, 0},
		{"first resend", []string{"1"}, 1},
		{"fifth resend", []string{"5"}, 5},
		{"not a number", []string{"two"}, 0},
		{"negative", []string{"-1"}, 0},
		{"padded", []string{" 2"}, 0},
		{"overflow", []string{"99999999999999999999999"}, 0},
		{"repeated header", []string{"3", "4"}, 3},
	}
	body := string(fixture(t, "message_new_private.json"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := http.Header{}
			if tt.header != nil {
				header[callback.HeaderRetryCounter] = tt.header
			}
			if status, _, got := handleOne(t, body, header); status != http.StatusOK || got == nil {
				t.Fatalf("status %d, message %v", status, got)
			}
			if got := callback.RetryCounter(header); got != tt.want {
				t.Errorf("retry counter = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMessageHandlerFunc(t *testing.T) {
	var got callback.Message
	f := callback.MessageHandlerFunc(func(_ context.Context, m callback.Message) error {
		got = m
		return nil
	})
	w := serve(mustHandler(t, f, callback.Options{}), request{body: string(fixture(t, "message_new_chat.json"))})
	if w.Code != http.StatusOK || got.PeerID != 2000000001 || got.Text != "доброе утро" {
		t.Fatalf("got %d, message %+v", w.Code, got)
	}
}

// compact returns the JSON s without insignificant whitespace, as VK sends it.
func compact(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestTextAsEncodingJSON: the text is hashed into the counting key, so it
// must read exactly as encoding/json reads it, invalid UTF-8 (one U+FFFD
// per byte) and lone surrogates (U+FFFD) included.
func TestTextAsEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		raw  string // the JSON string's text between its quotes
	}{
		{"plain", "доброе утро"},
		{"invalid bytes", "a\xff\xfeb"},
		{"a run of invalid bytes", "\xff\xff\xff"},
		{"encoded surrogate", "\xed\xa0\x80"},
		{"truncated sequence", "x\xe2\x82"},
		{"overlong", "\xc0\xaf"},
		{"escapes", `\"\\\/\b\f\n\r\t`},
		{"NUL", `a\u0000b`},
		{"surrogate pair", `\ud83d\ude00`},
		{"lone high surrogate", `\ud83d`},
		{"lone low surrogate", `\ude00x`},
		{"high surrogate then a letter", `\ud83d\u0041`},
		{"two highs then a low", `\ud83d\ud83d\ude00`},
		{"escaped non-ASCII", `\u00e9\u212a\uFFFD`},
		{"mixed", "\xff" + `\u00e9` + "\xe2\x82" + `\ud800`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want string
			if err := json.Unmarshal([]byte(`"`+tt.raw+`"`), &want); err != nil {
				t.Fatal(err)
			}
			object := `{"message":{"peer_id":10,"text":"` + tt.raw + `"}}`
			status, body, got := handleOne(t, event("message_new", fixtureGroup, fixtureSecret, object), nil)
			if status != http.StatusOK || got == nil {
				t.Fatalf("got %d %q", status, body)
			}
			if got.Text != want {
				t.Errorf("text = %q, encoding/json reads %q", got.Text, want)
			}
		})
	}
}

// TestDuplicateKeys: as with encoding/json, the last of duplicate keys
// wins, null leaves a number or a text as it was, and a second "message"
// object is read into the first.
func TestDuplicateKeys(t *testing.T) {
	tests := []struct {
		name   string
		object string
		want   callback.Message
	}{
		{"peer_id twice", `{"peer_id":1,"peer_id":2}`, callback.Message{PeerID: 2}},
		{"null keeps a number", `{"peer_id":1,"peer_id":null}`, callback.Message{PeerID: 1}},
		{"null keeps a text", `{"peer_id":1,"text":"a","text":null}`, callback.Message{PeerID: 1, Text: "a"}},
		{"text twice", `{"peer_id":1,"text":"a","text":"b"}`, callback.Message{PeerID: 1, Text: "b"}},
		{"out reset by null", `{"peer_id":1,"out":1,"out":null}`, callback.Message{PeerID: 1}},
		{"action twice", `{"peer_id":1,"action":"a","action":{"type":"b"}}`, callback.Message{PeerID: 1, Action: "b"}},
		{"messages merged", `{"message":{"peer_id":1,"text":"a"},"message":{"text":"b"}}`, callback.Message{PeerID: 1, Text: "b"}},
		{"null message unsets", `{"message":{"peer_id":1,"text":"a"},"message":null,"message":{"peer_id":2}}`, callback.Message{PeerID: 2}},
		{"attachments twice", `{"peer_id":1,"attachments":[{"type":"a"}],"attachments":[{"type":"b"},null]}`,
			callback.Message{PeerID: 1, Attachments: []callback.Attachment{{Type: "b"}, {}}}},
		{"attachment type twice", `{"peer_id":1,"attachments":[{"type":7,"type":"photo","photo":{"id":1},"photo":{"id":2}}]}`,
			callback.Message{PeerID: 1, Attachments: []callback.Attachment{{Type: "photo", ID: 2}}}},
		{"attachment field twice", `{"peer_id":1,"attachments":[{"type":"wall","wall":{"owner_id":3,"owner_id":null,"to_id":4}}]}`,
			callback.Message{PeerID: 1, Attachments: []callback.Attachment{{Type: "wall", OwnerID: 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"type":"message_new","group_id":2,"object":` + tt.object + `,"group_id":218245623,"secret":"x","secret":"` + fixtureSecret + `"}`
			status, resp, got := handleOne(t, body, nil)
			if status != http.StatusOK || got == nil {
				t.Fatalf("got %d %q", status, resp)
			}
			tt.want.GroupID = fixtureGroup
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("message:\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

// TestKeysFoldCase: like encoding/json, field names match keys in any
// case, Unicode folding included (ſ is an s, the Kelvin sign a k), and
// after escapes are decoded. Attachment objects are found under their
// exact type.
func TestKeysFoldCase(t *testing.T) {
	body := `{"TYPE":"message_new","Group_ID":218245623,"\u017fecret":"` + fixtureSecret + `","Event_Id":"e9","object":` +
		`{"Message":{"PEER_ID":10,"Text":"hi","OUT":1,"attachment\u017f":[{"type":"s","s":{"STIC\u212aER_ID":9}},` +
		`{"type":"photo","Photo":{"id":1},"ph\u006fto":{"id":2}}]}}}`
	status, resp, got := handleOne(t, body, nil)
	if status != http.StatusOK || got == nil {
		t.Fatalf("got %d %q", status, resp)
	}
	want := callback.Message{GroupID: fixtureGroup, EventID: "e9", PeerID: 10, Text: "hi", Out: true,
		Attachments: []callback.Attachment{{Type: "s", StickerID: 9}, {Type: "photo", ID: 2}}}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("message:\n got %+v\nwant %+v", *got, want)
	}
}

// TestNumberFields pins how the numbers the bot reads are taken: JSON
// integers or strings holding one as sent; null is 0; fractions,
// exponents, overflow, escapes and other types are errors.
func TestNumberFields(t *testing.T) {
	tests := []struct {
		value string
		want  int // -1: a 400
	}{
		{`42`, 42}, {`-0`, 0}, {`"42"`, 42}, {`"+42"`, 42}, {`"007"`, 7}, {`null`, 0},
		{`9223372036854775807`, 9223372036854775807},
		{`9223372036854775808`, -1}, {`1e3`, -1}, {`1.0`, -1}, {`"1e3"`, -1}, {`""`, -1}, {`" 1"`, -1},
		{`"\u0031"`, -1}, {`true`, -1}, {`{}`, -1}, {`[1]`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			object := `{"message":{"peer_id":10,"from_id":` + tt.value + `}}`
			status, body, got := handleOne(t, event("message_new", fixtureGroup, fixtureSecret, object), nil)
			if tt.want < 0 {
				if status != http.StatusBadRequest || !strings.Contains(body, "message.from_id") {
					t.Fatalf("got %d %q, want 400 naming message.from_id", status, body)
				}
				return
			}
			if status != http.StatusOK || got == nil || got.FromID != tt.want {
				t.Fatalf("got %d %q, message %+v; want from_id %d", status, body, got, tt.want)
			}
		})
	}
}
