package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// newHTTP returns a handler on fresh in-memory stores reading the time from
// clock.
func newHTTP(t testing.TB, clock *fakeClock) (*httpapi.Handler, counters.Stores) {
	t.Helper()
	stores := counters.MemoryStores(clock.Now)
	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h, stores
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
	h, err := httpapi.New(fakeStores(func(context.Context, string) error { return broken }), httpapi.Options{})
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
	b := counterstest.NewBlocker()
	stores := fakeStores(b.Call)
	stores.Timeout = 20 * time.Millisecond
	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpCall{"POST", "/counters/access/a", "", 503, "Store unavailable"}.do(t, h)
	if err := <-b.Ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("store call ended with %v", err)
	}
}

// TestHTTPAndPortShareStores: what the counter port counts, HTTP reads,
// and the other way round.
func TestHTTPAndPortShareStores(t *testing.T) {
	h, stores := newHTTP(t, newFakeClock(day))
	s := newServer(t, counters.ServerOptions{Stores: stores})
	c := dialClient(t, listen(t, s))
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
	if _, err := httpapi.New(stores, httpapi.Options{}); err == nil {
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
		if _, err := httpapi.New(stores, httpapi.Options{}); err == nil || !strings.Contains(err.Error(), "no "+tc.name+" store") {
			t.Errorf("HTTP handler without %s: %v", tc.name, err)
		}
		if _, err := counters.NewServer(counters.ServerOptions{Stores: stores}); err == nil || !strings.Contains(err.Error(), "no "+tc.name+" store") {
			t.Errorf("server without %s: %v", tc.name, err)
		}
	}
}

// TestHTTPUniqueAddBodyLimit: a unique add of the documented 1000 keys
// fits its route's body limit even when every key is 255 bytes that JSON
// must escape, and only past that is it a 413; the other routes keep the
// 16 KiB limit.
func TestHTTPUniqueAddBodyLimit(t *testing.T) {
	h, _ := newHTTP(t, newFakeClock(day))
	keysBody := func(n int, key func(i int) string) string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = key(i)
		}
		b, err := json.Marshal(map[string][]string{"keys": keys})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	uuids := keysBody(1000, func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) })
	worst := keysBody(1000, func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("\x01", 252) })
	if len(worst) < 1000*6*252 {
		t.Fatalf("worst-case body of %d bytes is not escaped", len(worst))
	}
	for _, c := range []httpCall{
		{"POST", "/counters/uniques/visitors", uuids, 200, `{"name":"visitors","changed":true}`},
		{"POST", "/counters/uniques/worst", worst, 200, `{"name":"worst","changed":true}`},
		// The limit: 1000 keys of 255 bytes each escaped as \uXXXX, with
		// quotes and commas, and 16 KiB more.
		{"POST", "/counters/uniques/visitors", worst + strings.Repeat(" ", 1000*(6*255+3)+16384-len(worst)+1), 413, "body over 1549384 bytes"},
		{"POST", "/counters/windows/w", `{"window":1}` + strings.Repeat(" ", 20000), 413, "body over 16384 bytes"},
	} {
		c.do(t, h)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, loopbackRequest("GET", "/counters/uniques/visitors", nil))
	var got struct{ Estimate int64 }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Estimate < 980 || got.Estimate > 1020 {
		t.Fatalf("estimate after 1000 UUIDs: %s (%v)", rec.Body, err)
	}
}

// TestHTTPEmptyPathSegment: an empty name in the middle of a path is a
// 400, not a redirect to another route; an escaped "//" inside a name is
// a name like any other.
func TestHTTPEmptyPathSegment(t *testing.T) {
	h, _ := newHTTP(t, newFakeClock(day))
	for _, c := range []httpCall{
		{"POST", "/counters/participants//visit", `{"key":"k"}`, 400, "empty counter name"},
		{"POST", "/counters/participants//leave", `{"key":"k"}`, 400, "empty counter name"},
		{"GET", "/counters/access//", "", 400, "empty counter name"},
		{"POST", "/counters/windows//", `{"window":1}`, 400, "empty counter name"},
		{"POST", "/counters/access/a%2F%2Fb", "", 200, `{"name":"a//b","total":1}`},
		{"GET", "/counters/access/a%2F%2Fb", "", 200, `{"name":"a//b","total":1}`},
	} {
		rec := c.do(t, h)
		if loc := rec.Header().Get("Location"); loc != "" {
			t.Errorf("%s %s: redirected to %s", c.method, c.path, loc)
		}
	}
}

// TestCorruptCountFilesAreAnInternalError: an access counter of the File
// store whose count files are all corrupt is answered 0x84 Internal error
// on the port and 500 over HTTP, without Retry-After (retrying does not
// help), and the connection stays open.
func TestCorruptCountFilesAreAnInternalError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "count0.dat"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := access.NewFile(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	stores := counters.MemoryStores(nil)
	stores.Access = f
	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []httpCall{
		{"POST", "/counters/access/default", "", 500, "Internal error"},
		{"GET", "/counters/access/default", "", 500, "Internal error"},
	} {
		rec := c.do(t, h)
		if ra := rec.Header().Get("Retry-After"); ra != "" || strings.Contains(rec.Body.String(), dir) {
			t.Errorf("%s %s: Retry-After %q, body %s: want none and no file path", c.method, c.path, ra, rec.Body)
		}
	}
	s := newServer(t, counters.ServerOptions{Stores: stores})
	c := pipe(t, s)
	var req []byte
	req = wire.AppendHit(req, 1, "default")
	req = wire.AppendTotal(req, 2, "default")
	req = wire.AppendNoop(req, 3)
	want := "91 20 84 00 0000000e 00000001 496e7465726e616c206572726f72" +
		"91 21 84 00 0000000e 00000002 496e7465726e616c206572726f72" +
		"91 00 00 00 00000000 00000003"
	got := exchange(t, c, req, len(unhex(t, want)))
	equalBytes(t, "answers", got, want)
}

// TestWindowClockOutOfRangeIsInvalid: the Redis window store's own time
// check (a WithClock time it cannot pass to Redis) is Invalid arguments,
// not a store failure to retry.
func TestWindowClockOutOfRangeIsInvalid(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	r, err := window.NewRedis(tg.Client, redistest.Prefix(t))
	if err != nil {
		t.Fatal(err)
	}
	stores := counters.MemoryStores(nil)
	stores.Windows = r.WithClock(func() time.Time { return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })
	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httpCall{"POST", "/counters/windows/w", `{"window":60}`, 400, "outside 1970 to 9999"}.do(t, h)
	if ra := rec.Header().Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on an invalid request", ra)
	}
	httpCall{"GET", "/counters/windows/w?window=60", "", 400, "outside 1970 to 9999"}.do(t, h)
	s := newServer(t, counters.ServerOptions{Stores: stores})
	c := pipe(t, s)
	got := exchange(t, c, wire.AppendWindowHit(nil, 1, 60, "w"), 29)
	equalBytes(t, "whit", got, "91 40 04 00 00000011 00000001 "+hexInvalid)
}

// TestHTTPStrictNamesAndBodies checks what encoding/json and the path
// decoding would let through: names that are not UTF-8, field names in
// another case, null bodies and null values. None may change a counter.
func TestHTTPStrictNamesAndBodies(t *testing.T) {
	h, stores := newHTTP(t, newFakeClock(day))
	visit := "/counters/participants/p/visit"
	for _, c := range []httpCall{
		{"POST", "/counters/access/a%FFb", "", 400, "not valid UTF-8"},
		{"POST", "/counters/access/a%FEb", `{"delta":2}`, 400, "not valid UTF-8"},
		{"GET", "/counters/access/a%FFb", "", 400, "not valid UTF-8"},
		{"POST", "/counters/participants/a%C3/visit", `{"key":"k"}`, 400, "not valid UTF-8"},
		{"GET", "/counters/participants/a%C3", "", 400, "not valid UTF-8"},
		{"POST", "/counters/windows/%80", `{"window":60}`, 400, "not valid UTF-8"},
		{"POST", "/counters/uniques/%ED%A0%80", `{"keys":["k"]}`, 400, "not valid UTF-8"}, // a UTF-16 surrogate
		{"GET", "/counters/uniques?names=x,a%FFb", "", 400, "names is not valid UTF-8"},
		{"GET", "/counters/access?prefix=a%FF", "", 400, "prefix is not valid UTF-8"},
		{"POST", "/counters/access/x", `{"Delta":2}`, 400, `unknown field "Delta"`},
		{"POST", "/counters/access/x", `{"DELTA":2}`, 400, "case-sensitive"},
		{"POST", "/counters/access/x", `null`, 400, "null"},
		{"POST", "/counters/access/x", ` null `, 400, "null"},
		{"POST", "/counters/access/x", `{"delta":null}`, 400, "null"},
		{"POST", "/counters/access/x", `2`, 400, "want a JSON object"},
		{"POST", "/counters/access/x", `"x"`, 400, "want a JSON object"},
		{"POST", visit, `null`, 400, "null"},
		{"POST", visit, `{"Key":"k"}`, 400, `unknown field "Key"`},
		{"POST", visit, `{"key":"k","Timeout":5}`, 400, `unknown field "Timeout"`},
		{"POST", visit, `{"key":null}`, 400, "null"},
		{"POST", visit, `{"key":"k","timeout":null}`, 400, "null"},
		{"POST", visit, "{\"key\":\"a\xffb\"}", 400, "not valid UTF-8"},
		{"POST", "/counters/participants/p/leave", `{"KEY":"k"}`, 400, "unknown field"},
		{"POST", "/counters/windows/w", `{"Window":60}`, 400, "unknown field"},
		{"POST", "/counters/windows/w", `{"window":null}`, 400, "null"},
		{"POST", "/counters/uniques/u", `{"Keys":["k"]}`, 400, "unknown field"},
		{"POST", "/counters/uniques/u", `{"keys":null}`, 400, "null"},
		{"POST", "/counters/uniques/u", `{"keys":["k",null]}`, 400, "null"},
		{"POST", "/counters/uniques/u", `null`, 400, "null"},
	} {
		c.do(t, h)
	}
	cx := ctx(t)
	for _, name := range []string{"x", "a\xffb", "a\xfeb"} {
		if _, err := stores.Access.Total(cx, name); !errors.Is(err, access.ErrNotFound) {
			t.Errorf("access counter %q exists after bad requests: %v", name, err)
		}
	}
	if n, err := stores.Participants.Active(cx, "p", participant.MaxTimeout); n != 0 || err != nil {
		t.Errorf("participants of p after bad requests: %d, %v", n, err)
	}
	if _, err := stores.Uniques.Count(cx, "u"); err == nil {
		t.Error("unique counter u exists after bad requests")
	}
	if n, err := stores.Windows.Count(cx, "w", time.Hour); n != 0 || err != nil {
		t.Errorf("window w after bad requests: %d, %v", n, err)
	}
	// Exact names still work, nested values included.
	for _, c := range []httpCall{
		{"POST", "/counters/access/x", ` {"delta":2} `, 200, `{"name":"x","total":2}`},
		{"POST", "/counters/uniques/u", `{"keys":["k","l"]}`, 200, `{"name":"u","changed":true}`},
		{"POST", "/counters/access/%C3%A9t%C3%A9", "", 200, `{"name":"été","total":1}`},
	} {
		c.do(t, h)
	}
}

// TestHTTPListsNamesThatAreNotUTF8 checks that a name created over the port
// with bytes that are not UTF-8 is listed with its exact bytes, and that
// two such names stay apart.
func TestHTTPListsNamesThatAreNotUTF8(t *testing.T) {
	h, stores := newHTTP(t, newFakeClock(day))
	cx := ctx(t)
	for name, n := range map[string]int64{"a\xffb": 3, "a\xfeb": 4, "ab": 5} {
		if _, err := stores.Access.Add(cx, name, n); err != nil {
			t.Fatal(err)
		}
	}
	httpCall{"GET", "/counters/access?prefix=a", "", 200,
		`{"prefix":"a","counters":[{"name":"ab","total":5},` +
			`{"name":"a\ufffdb","name_base64":"Yf5i","total":4},` +
			`{"name":"a\ufffdb","name_base64":"Yf9i","total":3}],"sum":12,"cursor":""}`}.do(t, h)
	httpCall{"GET", "/counters/access?prefix=a&limit=2", "", 200,
		`{"prefix":"a","counters":[{"name":"ab","total":5},` +
			`{"name":"a\ufffdb","name_base64":"Yf5i","total":4}],"sum":9,"cursor":"Yf5i"}`}.do(t, h)
	httpCall{"GET", "/counters/access?prefix=a&limit=2&cursor=Yf5i", "", 200,
		`{"prefix":"a","counters":[{"name":"a\ufffdb","name_base64":"Yf9i","total":3}],"sum":3,"cursor":""}`}.do(t, h)
}

// TestHTTPRoutesAreServed: every route of the exported table (the labels
// of the metrics) is served, at that method and pattern, and the table
// lists every route the handler serves: each pattern's other methods get a
// 405 naming exactly the table's methods.
func TestHTTPRoutesAreServed(t *testing.T) {
	h, _ := newHTTP(t, newFakeClock(1_700_000_000))
	allowed := map[string][]string{}
	for _, r := range httpapi.Routes() {
		allowed[r.Pattern] = append(allowed[r.Pattern], r.Method)
	}
	if len(allowed) == 0 {
		t.Fatal("no routes")
	}
	for pattern, methods := range allowed {
		path := strings.ReplaceAll(pattern, "{name}", "route-test")
		var seen []string
		for _, m := range methods {
			seen = append(seen, m)
			rec := httptest.NewRecorder()
			req := loopbackRequest(m, path, strings.NewReader("{}"))
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusNotFound && strings.Contains(rec.Body.String(), "no such counter route") || rec.Code == http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d %s; the table says it is served", m, path, rec.Code, rec.Body)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, loopbackRequest(http.MethodPut, path, nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("PUT %s: %d, want 405", path, rec.Code)
			continue
		}
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			if strings.Contains(rec.Header().Get("Allow"), m) != slices.Contains(seen, m) {
				t.Errorf("%s: Allow %q, the table has %v", pattern, rec.Header().Get("Allow"), seen)
			}
		}
	}
}
