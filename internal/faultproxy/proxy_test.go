package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// echoServer echoes every line it gets; received gets a copy of each line
// as it arrives at the server.
func echoServer(t *testing.T) (addr string, received <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					lines <- line
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), lines
}

type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t, c, bufio.NewReader(c)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) expect(want string) {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.r, got); err != nil || string(got) != want {
		c.t.Fatalf("read %q (%v), want %q", got, err, want)
	}
}

// quiet asserts that nothing arrives on lines for a moment. It can only
// miss a fault, never fail a correct proxy.
func quiet(t *testing.T, lines <-chan string) {
	t.Helper()
	select {
	case l := <-lines:
		t.Fatalf("%q reached the server while stalled", l)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestForwards(t *testing.T) {
	addr, _ := echoServer(t)
	p := redistest.NewProxy(t, addr)
	if p.Target() != addr {
		t.Errorf("target %q, want %q", p.Target(), addr)
	}
	c := dial(t, p.Addr())
	c.send("hello\n")
	c.expect("hello\n")
	if n := p.Open(); n != 1 {
		t.Errorf("%d connections open after a round trip on one, want 1", n)
	}
	big := strings.Repeat("x", 200<<10) + "\n" // several chunks
	c.send(big)
	c.expect(big)
}

// TestStallHoldsBytesAndResumeDeliversInOrder: bytes sent during a stall,
// on an open connection and on one opened during it, reach the server only
// after Resume, in order, and the connections stay usable.
func TestStallHoldsBytesAndResumeDeliversInOrder(t *testing.T) {
	addr, lines := echoServer(t)
	p := redistest.NewProxy(t, addr)
	old := dial(t, p.Addr())
	old.send("before\n")
	old.expect("before\n")
	<-lines

	p.Stall()
	p.Stall() // idempotent
	old.send("one\n")
	old.send("two\n")
	fresh := dial(t, p.Addr()) // accepted, but stalled too
	fresh.send("three\n")
	quiet(t, lines)

	p.Resume()
	old.expect("one\ntwo\n")
	fresh.expect("three\n")
	got := map[string]bool{}
	for range 3 {
		got[<-lines] = true
	}
	if !got["one\n"] || !got["two\n"] || !got["three\n"] {
		t.Errorf("server got %v", got)
	}
	p.Resume() // idempotent
	old.send("after\n")
	old.expect("after\n")
}

// TestStallHoldsAnswers: an answer on its way back is held too.
func TestStallHoldsAnswers(t *testing.T) {
	addr, lines := echoServer(t)
	p := redistest.NewProxy(t, addr)
	p.SetLatency(200 * time.Millisecond)
	c := dial(t, p.Addr())
	c.send("ping\n")
	<-lines // at the server; the echo is now delayed on its way back
	p.Stall()
	c.c.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
	if n, err := c.r.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("read %d bytes (%v) while stalled", n, err)
	}
	p.Resume()
	c.expect("ping\n")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCutDuringStallDropsAndRestores(t *testing.T) {
	addr, lines := echoServer(t)
	p := redistest.NewProxy(t, addr)
	c := dial(t, p.Addr())
	p.Stall()
	c.send("lost\n")
	p.Cut()
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("read after Cut: %v, want the connection closed", err)
	}
	refused := dial(t, p.Addr()) // accepted by the listener, then closed
	refused.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := refused.r.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("read on a connection made while cut: %v, want it closed", err)
	}
	p.Restore()
	p.Resume()
	quiet(t, lines)
	c = dial(t, p.Addr())
	c.send("back\n")
	c.expect("back\n")
}

// TestLatencyDelaysEachDirection: a round trip takes at least twice the
// latency, and pipelined lines keep their order.
func TestLatencyDelaysEachDirection(t *testing.T) {
	addr, _ := echoServer(t)
	p := redistest.NewProxy(t, addr)
	const d = 100 * time.Millisecond
	p.SetLatency(d)
	c := dial(t, p.Addr())
	begin := time.Now()
	var want strings.Builder
	for i := range 20 {
		line := strings.Repeat("ab", i) + "\n"
		want.WriteString(line)
		c.send(line)
	}
	c.expect(want.String())
	if rtt := time.Since(begin); rtt < 2*d {
		t.Errorf("round trip %v, want at least %v", rtt, 2*d)
	}
	p.SetLatency(0)
	c.send("fast\n")
	c.expect("fast\n")
}

// TestRedisThroughStall: a Redis command sent during a stall times out at
// the client, yet the server runs it once the stall ends — the double
// write a client's blind retry makes.
func TestRedisThroughStall(t *testing.T) {
	m := miniredis.RunT(t)
	p := redistest.NewProxy(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.Incr(ctx, "n").Err(); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := rdb.Incr(short, "n").Err()
	cancel()
	if err == nil {
		t.Fatal("INCR answered during a stall")
	}
	if v, _ := m.Get("n"); v != "1" {
		t.Fatalf("n = %s during the stall, want 1", v)
	}
	p.Resume()
	// The timed-out INCR runs once the stall ends.
	eventually.True(t, 5*time.Second, "the INCR held by the stall reaching the server", func() bool {
		v, _ := m.Get("n")
		return v == "2"
	})
	if v, err := rdb.Incr(ctx, "n").Result(); err != nil || v != 3 {
		t.Fatalf("INCR after the stall: %d, %v; want 3", v, err)
	}
}

// TestCloseWhileStalled: Close does not wait for a stall to end, and may be
// called twice.
func TestCloseWhileStalled(t *testing.T) {
	addr, _ := echoServer(t)
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	p.Stall()
	c.send("held\n")
	p.Close()
	p.Close()
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

func TestBadTarget(t *testing.T) {
	if _, err := faultproxy.New("no-port"); err == nil {
		t.Fatal("a target without a port was accepted")
	}
}
