package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestReadyzSeesRedisOutOfMemory takes the bot's Redis (a server of the
// test's own, noeviction) past its maxmemory: the webhook
// answers 503, once logged naming Redis's OOM however many are posted in
// the log's period; /readyz answers 503 naming it, and vkcounter_redis_oom
// is 1. Once Redis has room again, the webhook counts.
func TestReadyzSeesRedisOutOfMemory(t *testing.T) {
	tg := redistest.OwnServer(t, "--maxmemory-policy", "noeviction")
	var log syncbuf.Buffer
	a := startAppLog(t, tg, nil, &log)
	readyz := func() (int, string) {
		resp, err := http.Get(a.adminURL("/readyz"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != 200 {
		t.Fatalf("/readyz before: %d %s", code, body)
	}
	a.mustOK(t, event("e0", 1001, 1, "hello"))

	lift := redistest.PastMaxmemory(t, tg.Client)
	for i := range 5 {
		if code, body, _ := a.post(t, event(fmt.Sprint("e", i+1), 1002+i, 1, fmt.Sprint("text ", i)), nil); code != 503 {
			t.Fatalf("webhook past maxmemory: %d %s, want 503", code, body)
		}
	}
	n := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "callback: request failed") && strings.Contains(line, "OOM command not allowed") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the webhook's failures name Redis's OOM in %d lines for 5 webhooks, want once a period:\n%s", n, log.String())
	}
	code, body := readyz()
	if code != 503 || !strings.Contains(body, "out of memory") || !strings.Contains(body, "OOM") {
		t.Errorf("/readyz past maxmemory: %d %s, want 503 naming the OOM", code, body)
	}
	metrics := a.scrapeMetrics(t)
	for _, want := range []string{"vkcounter_redis_oom 1", "vkcounter_script_oom_errors_total 5"} {
		if !strings.Contains(metrics, "\n"+want+"\n") {
			t.Errorf("no %q in /metrics", want)
		}
	}

	// Room again: the webhook counts at once; /readyz stays 503 for
	// oomWindow after the last refusal (headroom's TestOOMWatch), naming it.
	lift()
	a.mustOK(t, event("e9", 1009, 1, "hello"))
	if code, body := readyz(); code != 503 || !strings.Contains(body, "counting script was refused") {
		t.Errorf("/readyz right after the refusals: %d %s", code, body)
	}
}
