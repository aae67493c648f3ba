package service

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	a.MustOK(t, event("warm", 1000, 1, "warm up"))
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
	code, body, _ := a.Post(t, event("meanwhile", 1000, 2, "meanwhile"), nil)
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
		resp, err := http.Post(a.URL("/callback"), "application/json", bytes.NewReader(event("after", 1000, 1, "after the cap")))
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

// quotingVK is a fake VK API whose error texts quote the token they were
// given, as VK's request_params or a proxy may: groups.getTokenPermissions
// refuses it (error 5) with the token upper-cased when refuse is set, and
// accepts it otherwise; every other method fails with 901 (the reply is
// dropped) quoting it whole and cut.
func quotingVK(t *testing.T, refuse bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "" {
			tok = r.Form.Get("access_token")
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/groups.getTokenPermissions") && refuse:
			fmt.Fprintf(w, `{"error":{"error_code":5,"error_msg":"User authorization failed: invalid access_token (%s).","request_params":[{"key":"access_token","value":%q}]}}`, strings.ToUpper(tok), tok)
		case strings.HasSuffix(r.URL.Path, "/groups.getTokenPermissions"):
			fmt.Fprint(w, `{"response":{"mask":266240,"permissions":[{"setting":4096,"name":"messages"},{"setting":262144,"name":"manage"}]}}`)
		default:
			fmt.Fprintf(w, `{"error":{"error_code":901,"error_msg":"Can't send messages for users without permission (token %s, also known as %s...)"}}`, tok, tok[:12])
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/method/"
}

// TestNoSecretPrinted: a VK whose error texts quote the token (refusing
// it, or dropping a reply): the token, in any case, whole or cut,
// appears neither in the log, nor in /stats, nor on the status page,
// and "[secret]" marks where it was removed.
func TestNoSecretPrinted(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		refuse      bool
	}{
		{"a VK-shaped token refused", "vk1.a.QuotedToken_0123456789-abcdefghijklmnop", true},
		{"a legacy token in a dropped reply", "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log syncbuf.Buffer
			a := startAppLog(t, nil, map[string]string{"VK_TOKEN": tc.token, "VK_API_URL": quotingVK(t, tc.refuse), "LOG_LEVEL": "debug"}, &log)
			get := func(path string) string {
				resp, err := http.Get(a.AdminURL(path))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return string(b)
			}
			if tc.refuse {
				eventually.True(t, 20*time.Second, "the token refused in /stats", func() bool { return strings.Contains(get("/stats"), `"refused"`) })
			} else {
				a.MustOK(t, event("e1", 1000, 1, "dropped"))
				eventually.True(t, 20*time.Second, "the reply dropped in /stats", func() bool { return strings.Contains(get("/stats"), `"last_drops"`) })
			}
			for name, s := range map[string]string{"the log": log.String(), "/stats": get("/stats"), "the page": get("/"), "/readyz": get("/readyz")} {
				low := strings.ToLower(s)
				if strings.Contains(low, strings.ToLower(tc.token[:12])) {
					t.Errorf("%s shows the token (or its first 12 characters):\n%s", name, s)
				}
				if name != "/readyz" && !strings.Contains(s, "[secret]") {
					t.Errorf("%s does not say where it redacted:\n%s", name, s)
				}
			}
		})
	}
}
