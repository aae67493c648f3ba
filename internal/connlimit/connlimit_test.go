package connlimit_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/connlimit"
	"github.com/vkcounter/vkcounter/internal/eventually"
)

// TestRefusesPastTheCap: with 2 open, a third connection reads the
// refusal and is closed; once one closes, the next is served.
func TestRefusesPastTheCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusals := 0
	l := connlimit.New(inner, 2, connlimit.HTTPRefusal(5*time.Second), func() { refusals++ })
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	_ = second
	if l.Open() != 2 {
		t.Fatalf("open = %d, want 2", l.Open())
	}

	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(third)
	if err != nil {
		t.Fatalf("refused connection: %v", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 503 ") || !strings.Contains(string(got), "\r\nRetry-After: 5\r\n") {
		t.Fatalf("refusal = %q", got)
	}
	if l.Refused() != 1 || l.Open() != 2 {
		t.Fatalf("refused %d open %d, want 1 and 2", l.Refused(), l.Open())
	}

	first.Close()
	first.Close() // a second Close gives back nothing more
	if l.Open() != 1 {
		t.Fatalf("open after a close = %d, want 1", l.Open())
	}
	dial()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("a connection under the cap again was not accepted")
	}
	eventually.True(t, 10*time.Second, "two connections open", func() bool { return l.Open() == 2 })
	if refusals != 1 {
		t.Fatalf("onFull called %d times, want 1", refusals)
	}
}
