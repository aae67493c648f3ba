package callback_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/callback"
)

// event returns a Callback API request body.
func event(typ string, groupID int, secret, object string) string {
	return fmt.Sprintf(`{"type":%q,"object":%s,"group_id":%d,"event_id":"e1","v":"5.199","secret":%q}`,
		typ, object, groupID, secret)
}

// textObject is a minimal message_new object in the 5.103+ shape.
const textObject = `{"message":{"date":1718003401,"from_id":10,"id":5,"peer_id":10,"text":"hi",` +
	`"conversation_message_id":3,"attachments":[]},"client_info":{"button_actions":["text"],` +
	`"keyboard":true,"inline_keyboard":true,"carousel":true,"lang_id":0}}`

func TestNewHandlerRejectsBadOptions(t *testing.T) {
	next := &recorder{}
	one := []callback.Group{{ID: 1, Secret: "s"}}
	tests := []struct {
		name    string
		next    callback.MessageHandler
		opts    callback.Options
		wantErr string
	}{
		{"nil handler", nil, callback.Options{Groups: one}, "nil MessageHandler"},
		{"nil handler func", callback.MessageHandlerFunc(nil), callback.Options{Groups: one}, "nil MessageHandler"},
		{"no groups", next, callback.Options{}, "no groups"},
		{"zero id", next, callback.Options{Groups: []callback.Group{{ID: 0}}}, "group #1: ID must be > 0, got 0"},
		{"negative id", next, callback.Options{Groups: []callback.Group{{ID: 1}, {ID: -5}}}, "group #2: ID must be > 0, got -5"},
		{"duplicate id", next, callback.Options{Groups: []callback.Group{{ID: 7}, {ID: 8}, {ID: 7}}}, "group #3: duplicate ID 7"},
		{"negative body limit", next, callback.Options{Groups: one, MaxBodyBytes: -1}, "MaxBodyBytes must not be negative"},
		{"negative retry after", next, callback.Options{Groups: one, RetryAfter: -time.Second}, "RetryAfter must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := callback.NewHandler(tt.next, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewHandler error = %v, want one containing %q", err, tt.wantErr)
			}
			if h != nil {
				t.Errorf("NewHandler returned a handler with an error")
			}
		})
	}
}

func TestNewHandlerCopiesGroups(t *testing.T) {
	groups := []callback.Group{{ID: 1, Secret: "s", Confirmation: "c"}}
	h := mustHandler(t, &recorder{}, callback.Options{Groups: groups})
	groups[0] = callback.Group{ID: 1, Secret: "changed", Confirmation: "changed"}

	w := serve(h, request{body: event("confirmation", 1, "s", "{}")})
	if w.Code != http.StatusOK || w.Body.String() != "c" {
		t.Fatalf("got %d %q, want 200 %q: the handler must not share the caller's slice", w.Code, w.Body, "c")
	}
}

func TestServeHTTP(t *testing.T) {
	failing := errors.New("redis: connection refused")
	tests := []struct {
		name        string
		req         request
		handlerErr  error
		wantStatus  int
		wantBody    string   // exact, unless wantBodyHas is set
		wantBodyHas []string // parts of a body worded by encoding/json
		wantHeader  map[string]string
		wantCalls   int
	}{
		// Method.
		{name: "GET", req: request{method: http.MethodGet, body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			wantStatus: 405, wantBody: "method not allowed\n", wantHeader: map[string]string{"Allow": "POST"}},
		{name: "PUT", req: request{method: http.MethodPut, body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			wantStatus: 405, wantBody: "method not allowed\n", wantHeader: map[string]string{"Allow": "POST"}},
		{name: "HEAD", req: request{method: http.MethodHead},
			wantStatus: 405, wantBody: "method not allowed\n", wantHeader: map[string]string{"Allow": "POST"}},

		// Malformed envelopes.
		{name: "empty body", req: request{body: ""},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "unexpected end of JSON input"}},
		{name: "not JSON", req: request{body: "type=message_new"},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "invalid character"}},
		{name: "truncated", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)[:60]},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "unexpected end of JSON input"}},
		{name: "array", req: request{body: "[" + event("message_new", fixtureGroup, fixtureSecret, textObject) + "]"},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "cannot unmarshal array"}},
		{name: "trailing data", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject) + "{}"},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "after top-level value"}},
		{name: "no type", req: request{body: `{"group_id":218245623,"secret":"Vk7qR2xLmP9sT4wZ","object":{}}`},
			wantStatus: 400, wantBody: "bad request: event envelope: no type\n"},
		{name: "group_id as string", req: request{body: `{"type":"message_new","group_id":"218245623","secret":"Vk7qR2xLmP9sT4wZ","object":{}}`},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "cannot unmarshal string", "group_id"}},
		{name: "secret as number", req: request{body: `{"type":"message_new","group_id":218245623,"secret":42,"object":{}}`},
			wantStatus: 400, wantBodyHas: []string{"bad request: event envelope: ", "cannot unmarshal number", "secret"}},

		// Group and secret.
		{name: "unknown group", req: request{body: event("message_new", 999, fixtureSecret, textObject)},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "unknown group without secret", req: request{body: `{"type":"message_new","group_id":999,"object":` + textObject + `}`},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "no group_id", req: request{body: `{"type":"message_new","secret":"Vk7qR2xLmP9sT4wZ","object":` + textObject + `}`},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "group_id 0", req: request{body: event("message_new", 0, fixtureSecret, textObject)},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "negative group_id", req: request{body: event("message_new", -fixtureGroup, fixtureSecret, textObject)},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "missing secret", req: request{body: `{"type":"message_new","group_id":218245623,"object":` + textObject + `}`},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "empty secret", req: request{body: event("message_new", fixtureGroup, "", textObject)},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "secret of another group", req: request{body: event("message_new", fixtureGroup, "s3", textObject)},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "wrong secret on confirmation", req: request{body: event("confirmation", fixtureGroup, "Vk7qR2xLmP9sT4wY", "{}")},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "wrong secret on ignored type", req: request{body: event("message_reply", fixtureGroup, "nope", "{}")},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "secret-less group without secret", req: request{body: `{"type":"message_new","group_id":2,"event_id":"e1","object":` + textObject + `}`},
			wantStatus: 200, wantBody: "ok", wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, wantCalls: 1},
		{name: "secret-less group ignores a secret", req: request{body: event("message_new", 2, "anything", textObject)},
			wantStatus: 200, wantBody: "ok", wantCalls: 1},

		// Confirmation.
		{name: "confirmation", req: request{body: event("confirmation", fixtureGroup, fixtureSecret, "null")},
			wantStatus: 200, wantBody: fixtureConfirmation, wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}},
		{name: "confirmation with format verbs", req: request{body: `{"type":"confirmation","group_id":3,"secret":"s3"}`},
			wantStatus: 200, wantBody: "%d%s%%%v%!", wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}},
		{name: "confirmation not configured", req: request{body: `{"type":"confirmation","group_id":2}`},
			wantStatus: 403, wantBody: "forbidden\n"},
		{name: "confirmation for unknown group", req: request{body: `{"type":"confirmation","group_id":4}`},
			wantStatus: 403, wantBody: "forbidden\n"},

		// message_new.
		{name: "message_new", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			wantStatus: 200, wantBody: "ok", wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, wantCalls: 1},
		{name: "message_new not counted", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			handlerErr: failing,
			wantStatus: 503, wantBody: "message not confirmed, retry later\n", wantHeader: map[string]string{"Retry-After": "5"}, wantCalls: 1},
		{name: "message_new no peer_id", req: request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"id":5,"text":"hi"}}`)},
			wantStatus: 400, wantBody: "bad request: message_new object: no usable peer_id\n"},
		{name: "message_new peer_id 0", req: request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"peer_id":0,"text":"hi"}}`)},
			wantStatus: 400, wantBody: "bad request: message_new object: no usable peer_id\n"},
		{name: "message_new negative peer_id", req: request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"peer_id":-5,"text":"hi"}}`)},
			wantStatus: 400, wantBody: "bad request: message_new object: no usable peer_id\n"},
		{name: "message_new null object", req: request{body: event("message_new", fixtureGroup, fixtureSecret, "null")},
			wantStatus: 400, wantBody: "bad request: message_new object: no usable peer_id\n"},
		{name: "message_new no object", req: request{body: `{"type":"message_new","group_id":218245623,"secret":"Vk7qR2xLmP9sT4wZ"}`},
			wantStatus: 400, wantBody: "bad request: message_new object: the event has no \"object\" field (VK sends the message in it)\n"},
		{name: "message_new object is a string", req: request{body: event("message_new", fixtureGroup, fixtureSecret, `"hi"`)},
			wantStatus: 400, wantBodyHas: []string{"bad request: message_new object: ", "cannot unmarshal string"}},
		{name: "message_new peer_id as a word", req: request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"peer_id":"ten","text":"hi"}}`)},
			wantStatus: 400, wantBodyHas: []string{"bad request: message_new object: ", "cannot unmarshal", "peer_id"}},

		// Everything else is acknowledged and ignored.
		{name: "remove", req: request{body: event("remove", fixtureGroup, fixtureSecret, "{}")},
			wantStatus: 200, wantBody: "ok", wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}},
		{name: "message_reply", req: request{body: event("message_reply", fixtureGroup, fixtureSecret, `{"peer_id":10,"text":"0","out":1}`)},
			wantStatus: 200, wantBody: "ok"},
		{name: "message_edit", req: request{body: event("message_edit", fixtureGroup, fixtureSecret, `{"peer_id":10,"text":"edited"}`)},
			wantStatus: 200, wantBody: "ok"},
		{name: "message_typing_state", req: request{body: event("message_typing_state", fixtureGroup, fixtureSecret, `{"state":"typing","from_id":10,"to_id":-218245623}`)},
			wantStatus: 200, wantBody: "ok"},
		{name: "group_join", req: request{body: event("group_join", fixtureGroup, fixtureSecret, `{"user_id":10,"join_type":"join"}`)},
			wantStatus: 200, wantBody: "ok"},
		{name: "unknown type with odd object", req: request{body: event("some_future_event", fixtureGroup, fixtureSecret, `[1,"x",{"y":null}]`)},
			wantStatus: 200, wantBody: "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &recorder{err: tt.handlerErr}
			h := mustHandler(t, next, callback.Options{})
			w := serve(h, tt.req)

			if w.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %q)", w.Code, tt.wantStatus, w.Body)
			}
			got := w.Body.String()
			switch {
			case tt.wantBodyHas != nil:
				for _, part := range tt.wantBodyHas {
					if !strings.Contains(got, part) {
						t.Errorf("body = %q, want it to contain %q", got, part)
					}
				}
			case got != tt.wantBody:
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if got := w.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tt.wantStatus != http.StatusServiceUnavailable && w.Header().Get("Retry-After") != "" {
				t.Errorf("Retry-After set on a %d", w.Code)
			}
			if got := len(next.messages()); got != tt.wantCalls {
				t.Errorf("HandleMessage called %d times, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	body := fixture(t, "message_new_private.json")
	size := int64(len(body))
	tests := []struct {
		name          string
		limit         int64
		contentLength int64 // -1: unknown, as with chunked encoding
		wantStatus    int
	}{
		{"exactly at the limit", size, size, 200},
		{"exactly at the limit, chunked", size, -1, 200},
		{"one byte over", size - 1, size, 413},
		{"one byte over, chunked", size - 1, -1, 413},
		{"far over", 100, size, 413},
		{"far over, chunked", 100, -1, 413},
		{"default limit", 0, size, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &recorder{}
			h := mustHandler(t, next, callback.Options{MaxBodyBytes: tt.limit})
			r := httptest.NewRequest(http.MethodPost, "/callback", bytes.NewReader(body))
			r.ContentLength = tt.contentLength
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)

			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %q)", w.Code, tt.wantStatus, w.Body)
			}
			wantCalls := 0
			if tt.wantStatus == http.StatusOK {
				wantCalls = 1
			} else if got := w.Body.String(); got != "request body too large\n" {
				t.Errorf("body = %q", got)
			}
			if got := len(next.messages()); got != wantCalls {
				t.Errorf("HandleMessage called %d times, want %d", got, wantCalls)
			}
		})
	}
}

// TestBodyLimitReadsNoMore checks that a body of unknown length is cut off
// right after the limit instead of being read to its end.
func TestBodyLimitReadsNoMore(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name          string
		contentLength int64
		wantMaxRead   int64
	}{
		{"declared too large", 8 << 20, 0},
		{"unknown length", -1, limit + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingReader{r: bytes.NewReader(hugeMessage(8 << 20))}
			r := httptest.NewRequest(http.MethodPost, "/callback", body)
			r.ContentLength = tt.contentLength
			w := httptest.NewRecorder()
			mustHandler(t, &recorder{}, callback.Options{MaxBodyBytes: limit}).ServeHTTP(w, r)

			if w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status = %d, want 413", w.Code)
			}
			if body.n > tt.wantMaxRead {
				t.Errorf("read %d bytes of the body, want at most %d", body.n, tt.wantMaxRead)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		want       string
	}{
		{"default", 0, "5"},
		{"whole seconds", 30 * time.Second, "30"},
		{"rounded up", 1500 * time.Millisecond, "2"},
		{"less than a second", time.Nanosecond, "1"},
		{"longest", time.Duration(math.MaxInt64), "9223372037"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &recorder{err: errors.New("down")}
			h := mustHandler(t, next, callback.Options{RetryAfter: tt.retryAfter})
			w := serve(h, request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)})
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("status = %d, want 503", w.Code)
			}
			if got := w.Header().Get("Retry-After"); got != tt.want {
				t.Errorf("Retry-After = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHandleMessageGetsRequestContext(t *testing.T) {
	type key struct{}
	next := &recorder{}
	h := mustHandler(t, next, callback.Options{})
	r := request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)}.build()
	r = r.WithContext(context.WithValue(r.Context(), key{}, "request"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)

	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200", w.Code)
	}
	if len(next.ctxs) != 1 || next.ctxs[0].Value(key{}) != "request" {
		t.Fatalf("HandleMessage did not get the request's context")
	}
}

func TestLogging(t *testing.T) {
	tests := []struct {
		name       string
		req        request
		handlerErr error
		level      zerolog.Level
		wantLines  int
		wantLevel  string
		wantInLine []string
	}{
		{name: "wrong method", req: request{method: http.MethodGet}, level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "warn", wantInLine: []string{`"status":405`, `"error":"method not allowed: GET"`}},
		{name: "malformed", req: request{body: "{"}, level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "warn", wantInLine: []string{`"status":400`, "unexpected end of JSON input"}},
		{name: "unknown group", req: request{body: event("message_new", 999, fixtureSecret, textObject)}, level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "warn", wantInLine: []string{`"status":403`, "group_id 999 is not configured", `"event_id":"e1"`}},
		{name: "wrong secret", req: request{body: event("message_new", fixtureGroup, "Vk7qR2xLmP9sT4wY", textObject)}, level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "warn", wantInLine: []string{`"status":403`, "wrong secret", `"group_id":218245623`}},
		{name: "no confirmation string", req: request{body: `{"type":"confirmation","group_id":2}`}, level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "warn", wantInLine: []string{`"status":403`, "no confirmation string configured for group_id 2"}},
		{name: "not counted", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			handlerErr: errors.New("redis: connection refused"), level: zerolog.InfoLevel,
			wantLines: 1, wantLevel: "error", wantInLine: []string{`"status":503`, "redis: connection refused"}},
		{name: "counted, info", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			level: zerolog.InfoLevel, wantLines: 0},
		{name: "counted, debug", req: request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)},
			level: zerolog.DebugLevel, wantLines: 1, wantLevel: "debug", wantInLine: []string{`"status":200`, `"type":"message_new"`}},
		{name: "confirmation, debug", req: request{body: string(fixture(t, "confirmation.json"))},
			level: zerolog.DebugLevel, wantLines: 1, wantLevel: "debug", wantInLine: []string{`"type":"confirmation"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := mustHandler(t, &recorder{err: tt.handlerErr}, callback.Options{
				Logger: zerolog.New(&buf).Level(tt.level),
			})
			serve(h, tt.req)

			lines := logLines(&buf)
			if len(lines) != tt.wantLines {
				t.Fatalf("%d log lines, want %d:\n%s", len(lines), tt.wantLines, buf.String())
			}
			if tt.wantLines == 0 {
				return
			}
			line := lines[0]
			if want := `"level":"` + tt.wantLevel + `"`; !strings.Contains(line, want) {
				t.Errorf("log line %s: want %s", line, want)
			}
			for _, s := range tt.wantInLine {
				if !strings.Contains(line, s) {
					t.Errorf("log line %s: want %s", line, s)
				}
			}
			for _, secret := range []string{fixtureSecret, "Vk7qR2xLmP9sT4wY", "s3"} {
				if strings.Contains(line, secret) {
					t.Errorf("log line contains a secret: %s", line)
				}
			}
		})
	}
}

// TestFailLogRateLimited: a flood of failed requests writes one line per
// outcome per FailLogEvery, not one per request.
func TestFailLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	h := mustHandler(t, &recorder{}, callback.Options{Logger: zerolog.New(&buf)})
	for range 100 {
		serve(h, request{body: "{"})
		serve(h, request{body: event("message_new", 999, fixtureSecret, textObject)})
	}
	lines := logLines(&buf)
	if len(lines) != 2 || !strings.Contains(lines[0], `"status":400`) || !strings.Contains(lines[1], `"status":403`) {
		t.Fatalf("%d log lines, want one for the 400s and one for the 403s:\n%s", len(lines), buf.String())
	}
}

func TestConcurrentRequests(t *testing.T) {
	const workers, perWorker = 8, 50
	next := &recorder{}
	h := mustHandler(t, next, callback.Options{})
	bodies := [][]byte{
		fixture(t, "message_new_private.json"),
		fixture(t, "message_new_photo.json"),
		fixture(t, "message_new_sticker.json"),
	}
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			for j := range perWorker {
				body := bodies[(i+j)%len(bodies)]
				w := serve(h, request{body: string(body)})
				if w.Code != http.StatusOK {
					errs <- fmt.Errorf("status %d: %s", w.Code, w.Body)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	msgs := next.messages()
	if len(msgs) != workers*perWorker {
		t.Fatalf("%d messages, want %d", len(msgs), workers*perWorker)
	}
	// Pooled buffers must not leak one request's bytes into another's message.
	texts := map[string]bool{"Привет! Сколько раз мне это уже писали?": true, "закат на Неве": true, "": true}
	for _, m := range msgs {
		if !texts[m.Text] {
			t.Fatalf("unexpected text %q", m.Text)
		}
	}
}

// TestTimeout: a MessageHandler that does not answer within Options.Timeout
// (Redis stalls) gets the request a 503 with Retry-After in time, and the
// handler sees its context end.
func TestTimeout(t *testing.T) {
	ended := make(chan error, 1)
	next := callback.MessageHandlerFunc(func(ctx context.Context, _ callback.Message) error {
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	})
	h := mustHandler(t, next, callback.Options{Timeout: 50 * time.Millisecond})
	w := serve(h, request{body: string(fixture(t, "message_new_private.json"))})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("handler's context ended with %v, want the deadline", err)
	}
	if _, err := callback.NewHandler(next, callback.Options{Groups: fixtureGroups, Timeout: -time.Second}); err == nil {
		t.Error("a negative Timeout was accepted")
	}
}

// TestOKContentTypeOverHTTP: over a real server, "ok" (a message counted,
// an event ignored) goes out as text/plain; charset=utf-8, the type
// net/http detects for it, the handler not asking for the header map.
func TestOKContentTypeOverHTTP(t *testing.T) {
	h := mustHandler(t, &recorder{}, callback.Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, body := range []string{event("message_new", fixtureGroup, fixtureSecret, textObject), event("message_reply", fixtureGroup, fixtureSecret, "{}")} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "ok" {
			t.Fatalf("answered %d %q, want 200 ok", resp.StatusCode, got)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("Content-Type = %q, want text/plain; charset=utf-8", ct)
		}
	}
}

// starter is a MessageStarter whose results the test gives.
type starter struct {
	results chan error    // handed to StartMessage's callers
	gaveUp  chan error    // GaveUp's err
	handled chan struct{} // HandleMessage called: must not be
}

func newStarter() *starter {
	return &starter{results: make(chan error, 1), gaveUp: make(chan error, 1), handled: make(chan struct{}, 1)}
}

func (s *starter) HandleMessage(context.Context, callback.Message) error {
	s.handled <- struct{}{}
	return nil
}

func (s *starter) StartMessage(callback.Message) <-chan error { return s.results }

func (s *starter) GaveUp(_ callback.Message, err error) error {
	s.gaveUp <- err
	return fmt.Errorf("gave up: %w", err)
}

// TestMessageStarter: a MessageStarter's result is waited for by the
// Handler: its result answers (ok, or 503 with Retry-After), HandleMessage
// is not called; past Timeout the request gets 503 with Retry-After and
// GaveUp is told the deadline; when the request's context ends first,
// GaveUp is told that.
func TestMessageStarter(t *testing.T) {
	body := string(fixture(t, "message_new_private.json"))
	t.Run("result", func(t *testing.T) {
		for _, result := range []error{nil, errors.New("down")} {
			s := newStarter()
			s.results <- result
			w := serve(mustHandler(t, s, callback.Options{}), request{body: body})
			if want := map[bool]int{true: 200, false: 503}[result == nil]; w.Code != want {
				t.Errorf("result %v: status %d, want %d", result, w.Code, want)
			}
			if result != nil && w.Header().Get("Retry-After") == "" {
				t.Errorf("result %v: no Retry-After", result)
			}
			if len(s.handled) != 0 || len(s.gaveUp) != 0 {
				t.Errorf("result %v: HandleMessage called %d, GaveUp %d times; want 0", result, len(s.handled), len(s.gaveUp))
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s := newStarter()
		w := serve(mustHandler(t, s, callback.Options{Timeout: 50 * time.Millisecond}), request{body: body})
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		if err := <-s.gaveUp; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GaveUp told %v, want the deadline", err)
		}
	})
	t.Run("request ended", func(t *testing.T) {
		s := newStarter()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := request{body: body}.build().WithContext(ctx)
		w := httptest.NewRecorder()
		mustHandler(t, s, callback.Options{Timeout: time.Hour}).ServeHTTP(w, r)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want 503", w.Code)
		}
		if err := <-s.gaveUp; !errors.Is(err, context.Canceled) {
			t.Errorf("GaveUp told %v, want the request's cancellation", err)
		}
	})
}

// TestBodyDeadlineLiftedForALongWait: over a real server, a message whose
// handling outlasts the body's deadline (BodyTimeout 1 s, the handler
// waiting 1.5 s of its Timeout of 4 s) keeps its context. net/http's read
// watching for the client going away would end at the deadline and cancel
// the request; net/http lifts the deadline itself when it starts that
// read, at the body's EOF, so the webhook does not lift it again.
func TestBodyDeadlineLiftedForALongWait(t *testing.T) {
	ended := make(chan error, 1)
	next := callback.MessageHandlerFunc(func(ctx context.Context, _ callback.Message) error {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
		}
		ended <- ctx.Err()
		return nil
	})
	h := mustHandler(t, next, callback.Options{BodyTimeout: time.Second, Timeout: 4 * time.Second})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(event("message_new", fixtureGroup, fixtureSecret, textObject)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := <-ended; err != nil {
		t.Fatalf("the handler's context ended with %v past the body's deadline", err)
	}
	if resp.StatusCode != http.StatusOK || string(got) != "ok" {
		t.Fatalf("answered %d %q, want 200 ok", resp.StatusCode, got)
	}
}

// TestAwaitDecidedAtOnce: a result there as the message starts is the
// answer even when the request's context has ended already; GaveUp is not
// called.
func TestAwaitDecidedAtOnce(t *testing.T) {
	s := newStarter()
	s.results <- nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := callback.Await(ctx, nil, s, callback.Message{}); err != nil {
		t.Fatalf("Await = %v, want the result, nil", err)
	}
	select {
	case err := <-s.gaveUp:
		t.Fatalf("GaveUp called with %v", err)
	default:
	}
}
