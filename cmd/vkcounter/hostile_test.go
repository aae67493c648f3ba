package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// slowBodies opens n connections to addr that each post to the webhook
// declaring a body of declared bytes and send 10 of them; it returns them
// open.
func slowBodies(t *testing.T, addr string, n, declared int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "POST /callback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"type\":\"m", declared); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// TestSlowBodiesCostWhatTheySent is the attack of issue 37 on the webhook:
// 400 connections each declare a 1 MiB body and send 10 bytes. The heap
// grows by far less than 64 MiB (the bodies are not allocated at their
// declared size: that was 400 MiB), a webhook posted meanwhile is
// answered 200 within 2 s, and the slow bodies are cut by the body
// deadline (a 400 each), not held for the server's ReadTimeout.
func TestSlowBodiesCostWhatTheySent(t *testing.T) {
	a := startApp(t, nil, nil)
	a.mustOK(t, event("warm", 1000, 1, "warm up"))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	conns := slowBodies(t, a.HTTPAddr(), 400, 1<<20)
	// Every connection has been read up to its body by now: a request
	// through the same server queues behind none of them.
	start := time.Now()
	code, body, _ := a.post(t, event("meanwhile", 1000, 2, "meanwhile"), nil)
	took := time.Since(start)
	grew := int64(heap()) - int64(before)
	t.Logf("400 slow bodies: heap in use +%.1f MiB; a webhook meanwhile: %d %q in %v", float64(grew)/(1<<20), code, body, took)
	if code != 200 || body != "ok" {
		t.Errorf("webhook meanwhile answered %d %q, want 200 ok", code, body)
	}
	if took > 2*time.Second {
		t.Errorf("webhook meanwhile took %v, want at most 2s", took)
	}
	if grew > 64<<20 {
		t.Errorf("heap in use grew by %d MiB with 400 slow bodies, want at most 64", grew>>20)
	}
	// The body deadline cuts them: each gets an answer or is closed well
	// before the server's ReadTimeout would have (10 s after the body
	// deadline's 5 s).
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("slow body %d answered %d, want 400", i, resp.StatusCode)
			}
		} else if err != io.EOF && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("slow body %d: %v", i, err)
		}
	}
}

// TestHTTPConnectionsCapped: past HTTP_MAX_CONNECTIONS, a connection is
// answered 503 with Retry-After and closed, the refusal is logged as a
// JSON line, and once the held connections close the webhook is served
// again.
func TestHTTPConnectionsCapped(t *testing.T) {
	var log syncbuf.Buffer
	a := startAppLog(t, nil, map[string]string{"HTTP_MAX_CONNECTIONS": "20"}, &log)
	held := make([]net.Conn, 0, 20)
	for range 20 {
		c, err := net.Dial("tcp", a.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c, err := net.Dial("tcp", a.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("21st connection: %v, want a 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("21st connection: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range held {
		c.Close()
	}
	// The server notices the closed connections as it reads them.
	eventually.NoError(t, 20*time.Second, "the webhook after the cap", func() error {
		resp, err := http.Post(a.url("/callback"), "application/json", bytes.NewReader(event("after", 1000, 1, "after the cap")))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	if !strings.Contains(log.String(), `"message":"HTTP connection refused: HTTP_MAX_CONNECTIONS are open"`) {
		t.Errorf("no JSON line for the refusal; log:\n%s", log.String())
	}
}
