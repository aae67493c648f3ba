package callback_test

import (
	"bytes"
	"context"
	"crypto/subtle"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	vkcallback "github.com/SevereCloud/vksdk/v2/callback"
	"github.com/SevereCloud/vksdk/v2/events"

	"github.com/vkcounter/vkcounter/callback"
)

// newVKSDK returns vksdk's own Callback configured like fixtureGroups, with
// per-group secrets only, and a counter of the messages it passes on.
func newVKSDK() (*vkcallback.Callback, *atomic.Int64) {
	cb := vkcallback.NewCallback()
	cb.ErrorLog = log.New(io.Discard, "", 0)
	for _, g := range fixtureGroups {
		if g.Secret != "" {
			cb.SecretKeys[g.ID] = g.Secret
		}
		if g.Confirmation != "" {
			cb.ConfirmationKeys[g.ID] = g.Confirmation
		}
	}
	var handled atomic.Int64
	cb.MessageNew(func(context.Context, events.MessageNewObject) { handled.Add(1) })
	return cb, &handled
}

// outcome is what a handler did with one request.
type outcome struct {
	status  int
	body    string
	handled int64 // messages passed on
}

// TestVKSDKHoles sends the same requests to vksdk's callback package and to
// ours: each case shows one hole listed in SPEC §1.2 in vksdk, and that
// this package closes it.
func TestVKSDKHoles(t *testing.T) {
	private := string(fixture(t, "message_new_private.json"))
	tests := []struct {
		name  string
		req   request
		vksdk outcome // the hole
		ours  outcome
	}{
		{
			name:  "no method check: GET is processed",
			req:   request{method: http.MethodGet, body: private},
			vksdk: outcome{200, "ok", 1},
			ours:  outcome{405, "method not allowed\n", 0},
		},
		{
			name:  "no body limit: 2 MiB are read and processed",
			req:   request{body: string(hugeMessage(2 << 20))},
			vksdk: outcome{200, "ok", 1},
			ours:  outcome{413, "request body too large\n", 0},
		},
		{
			name:  "unconfigured group_id without a secret passes",
			req:   request{body: `{"type":"message_new","group_id":999,"object":` + textObject + `}`},
			vksdk: outcome{200, "ok", 1},
			ours:  outcome{403, "forbidden\n", 0},
		},
		{
			name:  "confirmation string used as a format",
			req:   request{body: `{"type":"confirmation","group_id":3,"secret":"s3"}`},
			vksdk: outcome{200, "%!d(MISSING)%!s(MISSING)%%!v(MISSING)%!!(MISSING)", 0},
			ours:  outcome{200, "%d%s%%%v%!", 0},
		},
		{
			name:  "decode error in an unused field: client_info is a string",
			req:   request{body: replace(t, private, `"client_info": {`, `"client_info": "unsupported", "was": {`)},
			vksdk: outcome{400, "Bad Request\n", 0},
			ours:  outcome{200, "ok", 1},
		},
		{
			name:  "decode error in an unused field: payload is an object",
			req:   request{body: replace(t, private, `"random_id": 0`, `"random_id": 0, "payload": {"command": "start"}`)},
			vksdk: outcome{400, "Bad Request\n", 0},
			ours:  outcome{200, "ok", 1},
		},
		{
			name:  "decode error in an unused field: important is a string",
			req:   request{body: replace(t, private, `"important": false`, `"important": "no"`)},
			vksdk: outcome{400, "Bad Request\n", 0},
			ours:  outcome{200, "ok", 1},
		},
		{
			name:  "decode error in an unused field: geo coordinates are a string",
			req:   request{body: replace(t, private, `"random_id": 0`, `"random_id": 0, "geo": {"type": "point", "coordinates": "59.9386 30.3141"}`)},
			vksdk: outcome{400, "Bad Request\n", 0},
			ours:  outcome{200, "ok", 1},
		},
		{
			// Not a behavioural hole (both refuse it); the timing side is
			// covered by TestSecretComparedInConstantTime.
			name:  "equal-length wrong secret",
			req:   request{body: replace(t, private, fixtureSecret, "Vk7qR2xLmP9sT4wY")},
			vksdk: outcome{403, "Bad Secret\n", 0},
			ours:  outcome{403, "forbidden\n", 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb, handled := newVKSDK()
			w := serve(http.HandlerFunc(cb.HandleFunc), tt.req)
			if got := (outcome{w.Code, w.Body.String(), handled.Load()}); got != tt.vksdk {
				t.Errorf("vksdk: got %+v, want %+v (the hole is gone?)", got, tt.vksdk)
			}

			next := &recorder{}
			w = serve(mustHandler(t, next, callback.Options{}), tt.req)
			if got := (outcome{w.Code, w.Body.String(), int64(len(next.messages()))}); got != tt.ours {
				t.Errorf("ours: got %+v, want %+v", got, tt.ours)
			}
		})
	}
}

// TestVKSDKReadsWholeBody shows over a real connection that vksdk reads a
// body of any size, while ours stops at the limit.
func TestVKSDKReadsWholeBody(t *testing.T) {
	const limit = 1 << 20
	body := hugeMessage(3 << 20)
	cb, _ := newVKSDK()
	tests := []struct {
		name        string
		handler     http.Handler
		wantStatus  int
		wantReadMin int64
		wantReadMax int64
	}{
		{"vksdk", http.HandlerFunc(cb.HandleFunc), 200, int64(len(body)), int64(len(body))},
		{"ours", mustHandler(t, &recorder{}, callback.Options{MaxBodyBytes: limit}), 413, 0, limit + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var read atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				cr := &countingReader{r: r.Body}
				r.Body = io.NopCloser(cr)
				tt.handler.ServeHTTP(w, r)
				read.Store(cr.n)
			}))
			defer srv.Close()

			// Chunked, so that only reading tells the size.
			resp, err := http.Post(srv.URL, "application/json", io.MultiReader(bytes.NewReader(body)))
			if err != nil {
				// The server may close the connection before the client has
				// sent everything; that is the point of the limit.
				if tt.wantStatus == http.StatusOK {
					t.Fatal(err)
				}
			} else {
				_ = resp.Body.Close()
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
				}
			}
			srv.Close() // waits for the handler, so read is final
			if n := read.Load(); n < tt.wantReadMin || n > tt.wantReadMax {
				t.Errorf("handler read %d bytes, want %d..%d", n, tt.wantReadMin, tt.wantReadMax)
			}
		})
	}
}

// TestSecretComparedInConstantTime checks that every secret check goes
// through subtle.ConstantTimeCompare, over fixed-size digests, so neither
// the position of the first wrong byte nor the length of the guess changes
// the work done. vksdk compares with !=, which stops at the first
// difference.
func TestSecretComparedInConstantTime(t *testing.T) {
	h := mustHandler(t, &recorder{}, callback.Options{})
	if got, want := reflect.ValueOf(callback.SecretCompare(h)).Pointer(), reflect.ValueOf(subtle.ConstantTimeCompare).Pointer(); got != want {
		t.Fatal("secrets are not compared with subtle.ConstantTimeCompare")
	}

	type call struct{ lenX, lenY int }
	var (
		mu    sync.Mutex
		calls []call
	)
	callback.SetSecretCompare(h, func(x, y []byte) int {
		mu.Lock()
		calls = append(calls, call{len(x), len(y)})
		mu.Unlock()
		return subtle.ConstantTimeCompare(x, y)
	})

	tests := []struct {
		name       string
		secret     string
		wantStatus int
	}{
		{"right", fixtureSecret, 200},
		{"first byte wrong", "Wk7qR2xLmP9sT4wZ", 403},
		{"middle byte wrong", "Vk7qR2xLnP9sT4wZ", 403},
		{"last byte wrong", "Vk7qR2xLmP9sT4wY", 403},
		{"other case", "vk7qr2xlmp9st4wz", 403},
		{"prefix", "Vk7qR2xL", 403},
		{"longer", fixtureSecret + "x", 403},
		{"empty", "", 403},
		{"very long", strings.Repeat("Vk7qR2xLmP9sT4wZ", 64), 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			calls = nil
			mu.Unlock()
			w := serve(h, request{body: event("message_new", fixtureGroup, tt.secret, textObject)})
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", w.Code, tt.wantStatus)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []call{{32, 32}}; !reflect.DeepEqual(calls, want) {
				t.Errorf("compare calls = %v, want %v", calls, want)
			}
		})
	}
}
