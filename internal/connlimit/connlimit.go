// Package connlimit caps the connections a listener serves at once. A
// connection accepted past the cap is answered with a fixed refusal (for
// HTTP, a 503 with Retry-After) and closed at once, so the excess costs
// one accept and a few bytes, never a goroutine or a buffer of the server.
//
// golang.org/x/net/netutil.LimitListener, the library's answer, blocks
// Accept at the cap instead: the excess then waits in the kernel's backlog,
// unanswered, until the client gives up, and a webhook queued behind idle
// connections times out without a status. A refusal tells the client at
// once (VK re-delivers an event it got a 503 for), and is counted.
package connlimit

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// refuseWriteTimeout bounds the write of the refusal: a few bytes into a
// fresh socket's send buffer, which never waits unless the peer is gone.
const refuseWriteTimeout = 100 * time.Millisecond

// A Listener is a net.Listener that serves at most Max connections at
// once. Accept is called by one goroutine (a server's accept loop); the
// rest is safe for concurrent use.
type Listener struct {
	net.Listener
	max     int64
	refusal []byte
	onFull  func()

	open    atomic.Int64 // connections accepted and not yet closed
	refused atomic.Int64 // connections refused since the start
}

// New returns ln limited to max connections at once (max <= 0: no
// limit). A connection past the cap gets refusal written to it (nil:
// nothing) and is closed; onFull, if not nil, is called for each.
func New(ln net.Listener, max int, refusal []byte, onFull func()) *Listener {
	return &Listener{Listener: ln, max: int64(max), refusal: refusal, onFull: onFull}
}

// HTTPRefusal is the refusal of an HTTP listener: 503 with Retry-After
// (whole seconds), closing the connection.
func HTTPRefusal(retryAfter time.Duration) []byte {
	s := max(int64((retryAfter+time.Second-1)/time.Second), 1)
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: " + strconv.FormatInt(s, 10) + "\r\nConnection: close\r\nContent-Length: 21\r\n\r\ntoo many connections\n")
}

// Accept waits for the next connection under the cap. Connections past
// the cap are refused and closed here, never returned; errors of the
// underlying listener are returned as they are.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		// One goroutine accepts (the server's loop), so the count only
		// falls between this check and the Add.
		if l.max <= 0 || l.open.Load() < l.max {
			l.open.Add(1)
			return &conn{Conn: c, l: l}, nil
		}
		l.refuse(c)
	}
}

func (l *Listener) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.onFull != nil {
		l.onFull()
	}
	if len(l.refusal) > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		_, _ = c.Write(l.refusal)
	}
	_ = c.Close()
}

// Open is the number of connections accepted and not yet closed.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Refused is the number of connections refused since the start.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Max is the cap (0: none).
func (l *Listener) Max() int { return int(l.max) }

// conn gives its place back once, on its first Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// CloseWrite half-closes the connection when the underlying one can
// (net/http uses it to end a response before closing).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
