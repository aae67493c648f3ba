package counters_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/participant"
)

// httpCall is one request to an HTTPHandler and what it must answer.
type httpCall struct {
	method, path, body string
	code               int
	// want is the exact JSON answer, or for errors a substring of the
	// "error" field.
	want string
}

// newHTTP returns a handler on fresh in-memory stores reading the time from
// clock.
func newHTTP(t testing.TB, clock *fakeClock) (*counters.HTTPHandler, counters.Stores) {
	t.Helper()
	stores := counters.MemoryStores(clock.Now)
	h, err := counters.NewHTTPHandler(stores, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return h, stores
}

// do runs c against h and checks the status, the content type and the body.
func (c httpCall) do(t *testing.T, h http.Handler) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
	if rec.Code != c.code {
		t.Fatalf("%s %s %s: status %d %s, want %d", c.method, c.path, c.body, rec.Code, rec.Body, c.code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", c.method, c.path, ct)
	}
	if c.method == http.MethodHead {
		return rec // net/http's server drops the body; the recorder does not
	}
	if c.code < 300 {
		if got := strings.TrimSpace(rec.Body.String()); got != c.want {
			t.Fatalf("%s %s %s:\ngot  %s\nwant %s", c.method, c.path, c.body, got, c.want)
		}
		return rec
	}
	var e struct{ Error string }
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || !strings.Contains(e.Error, c.want) {
		t.Fatalf("%s %s %s: error body %v (%v), want an error with %q", c.method, c.path, c.body, e, err, c.want)
	}
	return rec
}

func TestHTTPRoutes(t *testing.T) {
	clock := newFakeClock(day)
	h, _ := newHTTP(t, clock)
	for _, c := range []httpCall{
		{"GET", "/counters/access/vk.messages", "", 404, "not found"},
		{"POST", "/counters/access/vk.messages", "", 200, `{"name":"vk.messages","total":1}`},
		{"POST", "/counters/access/vk.messages", "", 200, `{"name":"vk.messages","total":2}`},
		{"GET", "/counters/access/vk.messages", "", 200, `{"name":"vk.messages","total":2}`},
		{"HEAD", "/counters/access/vk.messages", "", 200, ""},
		{"POST", "/counters/access/a%2Fb%20c", "", 200, `{"name":"a/b c","total":1}`},
		{"POST", "/counters/access/vk.messages", `{"delta":5}`, 200, `{"name":"vk.messages","total":7}`},
		{"POST", "/counters/access/vk.messages", `{}`, 200, `{"name":"vk.messages","total":8}`},
		{"POST", "/counters/access/fresh", `{"delta":9223372036854775807}`, 200, `{"name":"fresh","total":9223372036854775807}`},
		{"POST", "/counters/access/fresh", `{"delta":1}`, 409, "overflow"},
		{"GET", "/counters/participants/vk.users", "", 200, `{"name":"vk.users","active":0}`},
		{"POST", "/counters/participants/vk.users/visit", `{"key":"42","timeout":300}`, 200,
			`{"name":"vk.users","key":"42","active":1,"new":true}`},
		{"POST", "/counters/participants/vk.users/visit", `{"key":"42","timeout":300}`, 200,
			`{"name":"vk.users","key":"42","active":1,"new":false}`},
		{"POST", "/counters/participants/vk.users/visit", `{"key":"43"}`, 200,
			`{"name":"vk.users","key":"43","active":2,"new":true}`},
		{"GET", "/counters/participants/vk.users?timeout=300", "", 200, `{"name":"vk.users","active":2}`},
		{"POST", "/counters/participants/vk.users/leave", `{"key":"42"}`, 200,
			`{"name":"vk.users","key":"42","active":1,"removed":true}`},
		{"POST", "/counters/participants/vk.users/leave", `{"key":"42"}`, 200,
			`{"name":"vk.users","key":"42","active":1,"removed":false}`},
	} {
		c.do(t, h)
	}
	clock.Set(day + 301)
	httpCall{"GET", "/counters/participants/vk.users", "", 200, `{"name":"vk.users","active":0}`}.do(t, h)
	httpCall{"GET", "/counters/participants/vk.users?timeout=400", "", 200, `{"name":"vk.users","active":1}`}.do(t, h)
}

// TestHTTPBadInputChangesNothing sends every kind of bad request and then
// checks that no counter exists.
func TestHTTPBadInputChangesNothing(t *testing.T) {
	h, stores := newHTTP(t, newFakeClock(day))
	long := strings.Repeat("n", 256)
	visit := "/counters/participants/p/visit"
	for _, c := range []httpCall{
		{"POST", "/counters/access/", "", 400, "empty counter name"},
		{"GET", "/counters/access/", "", 400, "empty counter name"},
		{"POST", "/counters/access/" + long, "", 400, "invalid counter name"},
		{"GET", "/counters/access/" + long, "", 400, "invalid counter name"},
		{"GET", "/counters/participants/", "", 400, "empty counter name"},
		{"GET", "/counters/participants/" + long, "", 400, "invalid name"},
		{"GET", "/counters/participants/p?timeout=abc", "", 400, "whole seconds"},
		{"GET", "/counters/participants/p?timeout=1.5", "", 400, "whole seconds"},
		{"GET", "/counters/participants/p?timeout=-5", "", 400, "invalid timeout"},
		{"GET", "/counters/participants/p?timeout=4294967296", "", 400, "invalid timeout"},
		{"POST", visit, "", 400, "empty body"},
		{"POST", visit, `{}`, 400, "invalid key"},
		{"POST", visit, `{"key":""}`, 400, "invalid key"},
		{"POST", visit, `{"key":"` + long + `"}`, 400, "invalid key"},
		{"POST", visit, `{"key":42}`, 400, "bad JSON"},
		{"POST", visit, `{"key":"k","timeout":-1}`, 400, "invalid timeout"},
		{"POST", visit, `{"key":"k","timeout":1.5}`, 400, "bad JSON"},
		{"POST", visit, `{"key":"k","timeout":9223372036854775807}`, 400, "invalid timeout"},
		{"POST", visit, `{"key":"k","timeout":1e30}`, 400, "bad JSON"},
		{"POST", visit, `{"key":"k","extra":1}`, 400, "unknown field"},
		{"POST", visit, `{"key":"k"} {"key":"l"}`, 400, "data after"},
		{"POST", visit, `{"key":`, 400, "bad JSON"},
		{"POST", visit, `[]`, 400, "bad JSON"},
		{"POST", "/counters/participants/" + long + "/visit", `{"key":"k"}`, 400, "invalid name"},
		{"POST", visit, `{"key":"` + strings.Repeat("x", 20000) + `"}`, 413, "body over 16384 bytes"},
		{"POST", visit, strings.Repeat("a", 20000), 413, "body over 16384 bytes"}, // too big before it is bad JSON
		{"POST", "/counters/participants/p/leave", `{"key":"k","timeout":1}`, 400, "unknown field"},
		{"POST", "/counters/participants/p/leave", `{"key":""}`, 400, "invalid key"},
		{"POST", "/counters/participants/p/leave", ``, 400, "empty body"},
		{"POST", "/counters/access/x", `{"delta":0}`, 400, "invalid increment"},
		{"POST", "/counters/access/x", `{"delta":-3}`, 400, "invalid increment"},
		{"POST", "/counters/access/x", `{"delta":1.5}`, 400, "bad JSON"},
		{"POST", "/counters/access/x", `{"delta":9223372036854775808}`, 400, "bad JSON"},
		{"POST", "/counters/access/x", `{"delta":"2"}`, 400, "bad JSON"},
		{"POST", "/counters/access/x", `{"delta":2,"key":"k"}`, 400, "unknown field"},
		{"POST", "/counters/access/x", `{"delta":2} {}`, 400, "data after"},
		{"POST", "/counters/access/x", `{"delta":`, 400, "bad JSON"},
		{"POST", "/counters/access/" + long, `{"delta":2}`, 400, "invalid counter name"},
		{"DELETE", "/counters/access/x", "", 405, "method DELETE not allowed"},
		{"PUT", "/counters/participants/p", "", 405, "not allowed"},
		{"GET", "/counters/participants/p/visit", "", 405, "not allowed"},
		{"GET", "/counters/nope", "", 404, "no such counter route"},
		{"POST", "/counters/participants/p/stay", `{"key":"k"}`, 404, "no such counter route"},
	} {
		c.do(t, h)
	}
	cx := ctx(t)
	for _, name := range []string{"x", long, "p"} {
		if _, err := stores.Access.Total(cx, name); !errors.Is(err, access.ErrNotFound) && !errors.Is(err, access.ErrInvalidName) {
			t.Errorf("access counter %.10q exists after bad requests: %v", name, err)
		}
	}
	if n, err := stores.Participants.Active(cx, "p", participant.MaxTimeout); n != 0 || err != nil {
		t.Errorf("participants of p after bad requests: %d, %v", n, err)
	}
}

func TestHTTPAllowHeader(t *testing.T) {
	h, _ := newHTTP(t, newFakeClock(day))
	for path, want := range map[string]string{
		"/counters/access/x":             "GET, HEAD, POST",
		"/counters/participants/p":       "GET, HEAD",
		"/counters/participants/p/leave": "POST",
	} {
		rec := httpCall{"PATCH", path, "", 405, "not allowed"}.do(t, h)
		if got := rec.Header().Get("Allow"); got != want {
			t.Errorf("%s: Allow %q, want %q", path, got, want)
		}
	}
}

func TestHTTPStoreFailure(t *testing.T) {
	broken := errors.New("redis: dial tcp 10.0.0.7:6379: connection refused")
	h, err := counters.NewHTTPHandler(fakeStores(func(context.Context, string) error { return broken }), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []httpCall{
		{"POST", "/counters/access/a", "", 503, "Store unavailable"},
		{"GET", "/counters/access/a", "", 503, "Store unavailable"},
		{"POST", "/counters/participants/p/visit", `{"key":"k"}`, 503, "Store unavailable"},
		{"POST", "/counters/participants/p/leave", `{"key":"k"}`, 503, "Store unavailable"},
		{"GET", "/counters/participants/p", "", 503, "Store unavailable"},
	} {
		rec := c.do(t, h)
		if rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "10.0.0.7") {
			t.Errorf("%s %s: headers %v body %s: want Retry-After and no internal address", c.method, c.path, rec.Header(), rec.Body)
		}
	}
}

// TestHTTPSlowStoreTimesOut: a store call past Stores.Timeout answers 503.
func TestHTTPSlowStoreTimesOut(t *testing.T) {
	b := newBlocker()
	stores := fakeStores(b.call)
	stores.Timeout = 20 * time.Millisecond
	h, err := counters.NewHTTPHandler(stores, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	httpCall{"POST", "/counters/access/a", "", 503, "Store unavailable"}.do(t, h)
	if err := <-b.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("store call ended with %v", err)
	}
}

// TestHTTPAndPortShareStores: what the counter port counts, HTTP reads,
// and the other way round.
func TestHTTPAndPortShareStores(t *testing.T) {
	h, stores := newHTTP(t, newFakeClock(day))
	s := newServer(t, counters.ServerOptions{Stores: stores})
	c := client(t, listen(t, s))
	if _, err := c.Hit(ctx(t), "shared"); err != nil {
		t.Fatal(err)
	}
	httpCall{"POST", "/counters/access/shared", "", 200, `{"name":"shared","total":2}`}.do(t, h)
	if n, err := c.Total(ctx(t), "shared"); n != 2 || err != nil {
		t.Fatalf("Total = %d, %v", n, err)
	}
}

func TestNewHTTPHandlerRejectsNegativeTimeout(t *testing.T) {
	stores := counters.MemoryStores(nil)
	stores.Timeout = -time.Second
	if _, err := counters.NewHTTPHandler(stores, zerolog.Nop()); err == nil {
		t.Fatal("accepted a negative store timeout")
	}
}

// TestMissingStoreIsAnError: a store left nil is refused by the server and
// the HTTP handler alike, rather than replaced by counters of their own
// that the other would not see.
func TestMissingStoreIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(*counters.Stores)
	}{
		{"Access", func(s *counters.Stores) { s.Access = nil }},
		{"Participants", func(s *counters.Stores) { s.Participants = nil }},
		{"Windows", func(s *counters.Stores) { s.Windows = nil }},
		{"Uniques", func(s *counters.Stores) { s.Uniques = nil }},
	} {
		stores := counters.MemoryStores(nil)
		tc.drop(&stores)
		if _, err := counters.NewHTTPHandler(stores, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "no "+tc.name+" store") {
			t.Errorf("HTTP handler without %s: %v", tc.name, err)
		}
		if _, err := counters.NewServer(counters.ServerOptions{Stores: stores}); err == nil || !strings.Contains(err.Error(), "no "+tc.name+" store") {
			t.Errorf("server without %s: %v", tc.name, err)
		}
	}
}
