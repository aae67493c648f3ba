package client

import (
	"context"
	"errors"
	"testing"
)

// TestRingClientRetiredEntry: a call that fetched a server's connection
// entry before SetServers (or Close) retired it does not dial on that
// entry, which no map holds any more (Close and Hold would never see its
// connection): it uses the current entry, or fails once closed.
func TestRingClientRetiredEntry(t *testing.T) {
	const x, y = "127.0.0.1:1", "127.0.0.1:2"
	rc, err := NewRingClient(context.Background(), []string{x, y}, RingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	stale, err := rc.conn(x) // a call fetched x's entry...
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.SetServers([]string{y}); err != nil { // ...then x left the ring
		t.Fatal(err)
	}
	stale.mu.Lock()
	retired := stale.retired
	stale.mu.Unlock()
	if !retired {
		t.Fatal("the entry of a server off the ring, holding nothing, was not retired")
	}
	conn, err := rc.lockFetched(x, stale)
	if err != nil {
		t.Fatal(err)
	}
	conn.mu.Unlock()
	rc.mu.Lock()
	current := rc.conns[x]
	rc.mu.Unlock()
	if conn == stale || conn != current {
		t.Fatalf("the call locked %p; the retired entry is %p, the current one %p", conn, stale, current)
	}

	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.lockFetched(x, conn); !errors.Is(err, errRingClosed) {
		t.Fatalf("a call that fetched its entry before Close: %v, want %v", err, errRingClosed)
	}
}
