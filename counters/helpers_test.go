package counters_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// testTimeout bounds every blocking step of a test.
const testTimeout = counterstest.Timeout

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock = counterstest.Clock

func newFakeClock(sec int64) *fakeClock { return counterstest.NewClock(sec) }

// newServer returns a server closed at the end of the test.
func newServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	return counterstest.NewServer(t, opts)
}

// listen serves s on a loopback port and returns its address.
func listen(t testing.TB, s *counters.Server) string { return counterstest.Listen(t, s) }

// pipe serves one end of a net.Pipe on s and returns the other.
func pipe(t testing.TB, s *counters.Server) net.Conn { return counterstest.Pipe(t, s) }

// dial returns a raw TCP connection to addr with a deadline.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// dialClient returns a client connected to addr.
func dialClient(t testing.TB, addr string) *client.Client { return counterstest.Dial(t, addr) }

// ctx returns a context that ends with the test or after testTimeout.
func ctx(t testing.TB) context.Context { return counterstest.Context(t) }

// unhex decodes a fixture written as hex with spaces for readability.
func unhex(t testing.TB, s string) []byte { return counterstest.Unhex(t, s) }

// exchange writes req and reads exactly n bytes of answer.
func exchange(t testing.TB, c net.Conn, req []byte, n int) []byte {
	t.Helper()
	return counterstest.Exchange(t, c, req, n)
}

// expectClosed asserts that the server closed c: a read ends without data.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v: connection still open", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed: %v", err)
	}
}

// statsMap returns s's statistics by name.
func statsMap(s *counters.Server) map[string]string { return counterstest.Stats(s) }

// equalBytes fails the test unless got equals the fixture want.
func equalBytes(t testing.TB, what string, got []byte, want string) {
	t.Helper()
	counterstest.EqualBytes(t, what, got, want)
}

// dumpAll returns the server's counters sorted by name.
func dumpAll(t testing.TB, c *client.Client) []wire.DumpEntry { return counterstest.Dump(t, c) }

// redisAccess returns an access counter store on rdb under prefix.
func redisAccess(tb testing.TB, rdb redis.UniversalClient, prefix string) *access.Redis {
	tb.Helper()
	s, err := access.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// redisParticipants returns a participant counter store on rdb under
// prefix.
func redisParticipants(tb testing.TB, rdb redis.UniversalClient, prefix string) *participant.Redis {
	tb.Helper()
	s, err := participant.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// httpCall is one request to the HTTP API and what it must answer.
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
