package counters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/counterstest"
)

// TestHold: Hold returns nil when its context ends, leaving the connection
// open and what it acquired held, and an error when the server goes away.
func TestHold(t *testing.T) {
	srv := counterstest.NewServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := counterstest.Listen(t, srv)
	ctx := context.Background()
	c, err := counters.Dial(ctx, addr)
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
