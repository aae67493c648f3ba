package httpapi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
)

// day is a time in whole days, for the window counters' tests.
const day = 20000 * 86400

// hexInvalid is the body of a StatusInvalid answer ("Invalid arguments").
const hexInvalid = "496e76616c696420617267756d656e7473"

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock = counterstest.Clock

func newFakeClock(sec int64) *fakeClock { return counterstest.NewClock(sec) }

func ctx(t testing.TB) context.Context { return counterstest.Context(t) }

func newServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	return counterstest.NewServer(t, opts)
}

func listen(t testing.TB, s *counters.Server) string { return counterstest.Listen(t, s) }

func dialClient(t testing.TB, addr string) *client.Client { return counterstest.Dial(t, addr) }

func pipe(t testing.TB, s *counters.Server) net.Conn { return counterstest.Pipe(t, s) }

func exchange(t testing.TB, c net.Conn, req []byte, n int) []byte {
	t.Helper()
	return counterstest.Exchange(t, c, req, n)
}

func unhex(t testing.TB, s string) []byte { return counterstest.Unhex(t, s) }

func equalBytes(t testing.TB, what string, got []byte, want string) {
	t.Helper()
	counterstest.EqualBytes(t, what, got, want)
}

func fakeStores(fn func(ctx context.Context, op string) error) counters.Stores {
	return counterstest.FakeStores(fn)
}

// httpCall is one request to a Handler and what it must answer.
type httpCall struct {
	method, path, body string
	code               int
	want               string // see counterstest.HTTPCall
}

// do runs c against h and checks the answer (counterstest.HTTPCall.Do).
func (c httpCall) do(t *testing.T, h http.Handler) *httptest.ResponseRecorder {
	t.Helper()
	return counterstest.HTTPCall{Method: c.method, Path: c.path, Body: c.body, Code: c.code, Want: c.want}.Do(t, h)
}

func loopbackRequest(method, target string, body io.Reader) *http.Request {
	return counterstest.LoopbackRequest(method, target, body)
}
