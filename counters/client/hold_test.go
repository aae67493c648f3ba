package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// TestHold: Hold returns nil when its context ends, leaving the connection
// open and what it acquired held, and an error when the server goes away.
func TestHold(t *testing.T) {
	srv := counterstest.NewServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := counterstest.Listen(t, srv)
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Acquire(ctx, "lock", 1, 1); err != nil {
		t.Fatal(err)
	}

	hctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = c.Hold(hctx)
	cancel()
	if err != nil {
		t.Fatalf("Hold after its context ended: %v, want nil", err)
	}
	if v, err := c.Get(ctx, "lock"); err != nil || v != 1 {
		t.Fatalf("after Hold: Get = %d, %v; want 1 still held", v, err)
	}

	held := make(chan error, 1)
	go func() { held <- c.Hold(ctx) }()
	srv.Close()
	select {
	case err := <-held:
		if err == nil || !strings.Contains(err.Error(), "closed the connection") {
			t.Fatalf("Hold when the server stopped: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Hold did not notice the server closing the connection")
	}
	if err := c.Noop(ctx); err == nil {
		t.Fatal("the client is still usable after losing its connection")
	}
}

// callTimeout is the timeout of the call made before a hold in the tests
// that check the hold outlives it.
const callTimeout = 300 * time.Millisecond

// holdPastCallDeadline acquires "lock" with a context that times out after
// callTimeout, then holds until three times that after the start: the
// hold must last until its own context ends, with nil, not end with the
// call's deadline.
func holdPastCallDeadline(t *testing.T, acquire func(ctx context.Context) error, hold func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err := acquire(cctx)
	cancel()
	if err != nil {
		t.Fatalf("acquire within %v: %v", callTimeout, err)
	}
	end := start.Add(3 * callTimeout)
	hctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	if err := hold(hctx); err != nil {
		t.Fatalf("Hold after a call with a %v timeout: %v, want nil when its own context ends", callTimeout, err)
	}
	if now := time.Now(); now.Before(end) {
		t.Fatalf("Hold returned %v before its context ended", end.Sub(now))
	}
}

// TestHoldOutlivesCallDeadline: the deadline of the call made before Hold
// does not end the hold (it used to, reported as a lost connection).
func TestHoldOutlivesCallDeadline(t *testing.T) {
	t.Parallel()
	addr := counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	holdPastCallDeadline(t,
		func(ctx context.Context) error { _, err := c.Acquire(ctx, "lock", 1, 1); return err },
		c.Hold)
	if v, err := c.Get(ctx, "lock"); err != nil || v != 1 {
		t.Fatalf("after Hold: Get = %d, %v; want 1 still held", v, err)
	}
}

// deadlineConn records the deadlines last set on a net.Conn.
type deadlineConn struct {
	net.Conn
	mu          sync.Mutex
	read, write time.Time
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.read, c.write = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.write = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) deadlines() (read, write time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read, c.write
}

// TestClientCallsLeaveNoDeadline: every kind of call clears the deadline
// its context put on the connection when it ends, so that nothing after
// it (Hold above all) inherits it.
func TestClientCallsLeaveNoDeadline(t *testing.T) {
	addr := counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	dc := &deadlineConn{Conn: nc}
	c := client.NewClient(dc)
	defer c.Close()
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"acquire", func(ctx context.Context) error { _, err := c.Acquire(ctx, "lock", 1, 1); return err }},
		{"error status", func(ctx context.Context) error {
			if _, err := c.Total(ctx, "never-hit"); !errors.Is(err, wire.StatusNotFound) {
				return fmt.Errorf("Total of a counter never hit: %v", err)
			}
			return nil
		}},
		{"pipeline", func(ctx context.Context) error {
			p := c.Pipeline()
			p.Get("lock")
			p.Noop()
			_, err := p.Exec(ctx)
			return err
		}},
		{"dump", func(ctx context.Context) error {
			return c.Dump(ctx, func(wire.DumpEntry) error { return nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			err := tc.call(cctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if r, w := dc.deadlines(); !r.IsZero() || !w.IsZero() {
				t.Fatalf("after the call: read deadline %v, write deadline %v; want none", r, w)
			}
		})
	}
}
