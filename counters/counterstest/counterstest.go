// Package counterstest serves a real counter server on a loopback port for
// tests, in the manner of net/http/httptest.
package counterstest

import (
	"errors"
	"net"
	"testing"

	"github.com/vkcounter/vkcounter/counters"
)

// NewServer returns a server with opts, closed at the end of the test.
func NewServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	t.Helper()
	s, err := counters.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Listen serves s on 127.0.0.1:0 and returns its address. At the end of the
// test s is closed and Serve must have returned ErrServerClosed.
func Listen(t testing.TB, s *counters.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, counters.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// Start is NewServer then Listen: a server with opts on a loopback port.
func Start(t testing.TB, opts counters.ServerOptions) string {
	t.Helper()
	return Listen(t, NewServer(t, opts))
}
