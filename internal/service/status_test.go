package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/vkcounter/vkcounter/admin/admintest"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// getPage fetches the status page within 5 s and returns its status and
// body.
func (a *app) getPage(t testing.TB) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(a.AdminURL("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode == 200 && ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	return resp.StatusCode, string(b)
}

// getStats fetches /stats flattened: "bot.received" → "12".
func (a *app) getStats(t testing.TB) map[string]string {
	t.Helper()
	resp, err := http.Get(a.AdminURL("/stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := admintest.Flat(body)
	if err != nil {
		t.Fatal(err)
	}
	return flat
}

// TestStatusPageMatchesStats renders the page of a live service that
// counted messages, sent replies and served the counter port and the
// /counters/ API, and checks every figure it shows against /stats; the
// charts hold the messages counted and replies sent.
func TestStatusPageMatchesStats(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, map[string]string{"COUNTER_ADDR": "127.0.0.1:0", "COUNTERS_HTTP_TOKEN": "ct-0123456789"})
		a.VK.FailNext(901) // the first reply: VK refuses it for good
		for i := range 4 {
			a.MustOK(t, event(fmt.Sprintf("e%d", i), 1000, i+1, "hello"))
		}
		a.MustOK(t, event("e0", 1000, 1, "hello")) // a re-delivery
		a.WaitSends(t, 3)
		ctx := context.Background()
		c, err := client.Dial(ctx, a.CounterAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close() // open until the figures are compared: one connection
		for range 3 {
			if _, err := c.Hit(ctx, "page"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Get(ctx, "missing"); err == nil {
			t.Fatal("Get of a missing resource counter succeeded")
		}
		req, _ := http.NewRequest(http.MethodGet, a.URL("/counters/access/page"), nil)
		req.Header.Set("Authorization", "Bearer ct-0123456789")
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		// Settled: the replies are done and the activity flushed when
		// the outbox is read empty.
		eventually.True(t, 10*time.Second, "settled", func() bool {
			s := a.getStats(t)
			return s["outbox.length"] == "0" && s["bot.sent"] == "3"
		})

		code, page := a.getPage(t)
		stats := a.getStats(t)
		if code != 200 {
			t.Fatalf("page: %d %s", code, page)
		}
		for _, e := range admintest.Disagree(page, stats, "bot.received", "bot.duplicates", "bot.sent", "bot.dropped", "outbox.length", "counter_port.connections",
			"counter_port.requests.hit", "counter_port.failed.not_found", "counter_port.http_requests./counters/access/{name}", "ready", "service.version") {
			t.Error(e)
		}
		if stats["bot.received"] != "5" || stats["bot.dropped"] != "1" || stats["counter_port.requests.hit"] != "3" || stats["counter_port.connections"] != "1" {
			t.Errorf("/stats: %v", stats)
		}
		for _, want := range []string{"4 in the last hour", "3 in the last hour", `<meta http-equiv="refresh" content="5">`, "<svg",
			"community " + strconv.Itoa(testGroup) + ", peer 1000: ", "901"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
		for _, load := range []string{"<script", "src=", "<link", "url(", "@import", "<iframe", "<object"} {
			if strings.Contains(page, load) {
				t.Errorf("the page holds %q: it must load nothing and run no script", load)
			}
		}
	}, singleServers...)
}

// TestStatusPageHoldsNoSecret: with a token, a community secret, a
// confirmation string, the counters API's token and a Redis password set,
// neither the page nor /stats shows any of them, even in an error.
func TestStatusPageHoldsNoSecret(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("redis-pw-0123456789")
	tg := &redistest.Target{Kind: redistest.Mini, Mini: mr, Addr: mr.Addr(), URL: "redis://:redis-pw-0123456789@" + mr.Addr()}
	secrets := map[string]string{
		"VK_TOKEN":            "vk1.a.tokentokentoken-0123456789",
		"VK_SECRET":           "callback-secret-0123456789",
		"VK_CONFIRMATION":     "confirm-0123456789",
		"COUNTERS_HTTP_TOKEN": "counters-token-0123456789",
	}
	// A VK that refuses the token with an answer quoting it: the page
	// and /stats must not repeat it. The token is read once: the handler
	// runs while the test changes secrets.
	token := secrets["VK_TOKEN"]
	quoting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"error":{"error_code":5,"error_msg":"User authorization failed: invalid access_token (%s)."}}`, token)
	}))
	defer quoting.Close()
	secrets["VK_API_URL"] = quoting.URL + "/method/"
	a := startApp(t, tg, secrets)
	delete(secrets, "VK_API_URL")
	var code int
	var page string
	eventually.NoError(t, 10*time.Second, "VK's refusal on the page", func() error {
		if code, page = a.getPage(t); code != 200 || !strings.Contains(page, "invalid access_token ([secret])") {
			return fmt.Errorf("page %d without VK's refusal of the token", code)
		}
		return nil
	})
	resp, err := http.Get(a.AdminURL("/stats"))
	if err != nil {
		t.Fatal(err)
	}
	stats, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for name, s := range map[string]string{"the page": page, "/stats": string(stats)} {
		for _, secret := range append([]string{"redis-pw-0123456789"}, mapValues(secrets)...) {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows %q", name, secret)
			}
		}
	}
	for _, want := range []string{"<code>VK_TOKEN</code></td><td><code>set</code>", "<code>REDIS_URL</code></td><td><code>set</code>",
		"<code>VK_GROUPS</code></td><td><code>not set</code>", "<td>1 of 1</td><td><b>refused</b>", "[secret]"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestStatusPageRedisDown: with Redis gone the page still answers at once,
// not ready, saying that Redis does not answer, as soon as a call of the
// service's own has failed (the sender's waiting read, cut) and so
// readiness no longer rests on the last answered one; so does a Redis that
// stalls, once a call times out (a webhook's count), within the readiness
// check's second.
func TestStatusPageRedisDown(t *testing.T) {
	t.Parallel() // mostly waits (a webhook's timeout in a stall): alongside the other waiting tests
	t.Run("closed", func(t *testing.T) {
		mr := miniredis.RunT(t)
		a := startApp(t, &redistest.Target{Kind: redistest.Mini, Mini: mr, Addr: mr.Addr(), URL: "redis://" + mr.Addr()}, env("SHUTDOWN_TIMEOUT", "100ms"))
		a.MustOK(t, event("e1", 1000, 1, "hello"))
		mr.Close()
		eventually.NoError(t, 5*time.Second, "the page saying Redis is down", func() error {
			start := time.Now()
			code, page := a.getPage(t)
			if code != 200 || time.Since(start) > 3*time.Second {
				t.Fatalf("page: %d after %v", code, time.Since(start))
			}
			for _, want := range []string{"not ready", "redis: ", `<span class="badge bad">no</span>`, `data-stat="bot.received">1<`} {
				if !strings.Contains(page, want) {
					return fmt.Errorf("the page lacks %q", want)
				}
			}
			return nil
		})
	})
	t.Run("stalled", func(t *testing.T) {
		tg := redistest.Open(t, redistest.Mini)
		proxy, url := viaProxy(t, tg)
		a := startApp(t, tg, env("REDIS_URL", url, "SHUTDOWN_TIMEOUT", "100ms"))
		a.MustOK(t, event("e1", 1000, 1, "hello"))
		proxy.Stall()
		defer proxy.Resume()
		if code, _, _ := a.Post(t, event("e2", 1000, 2, "hello"), nil); code != 503 {
			t.Fatalf("a webhook during a stall: %d, want 503", code)
		}
		start := time.Now()
		code, page := a.getPage(t)
		if code != 200 || time.Since(start) > 3*time.Second || !strings.Contains(page, "not ready") || !strings.Contains(page, `<span class="badge bad">no</span>`) {
			t.Fatalf("page during a stall: %d after %v: %s", code, time.Since(start), page)
		}
	})
}

// TestStatusPageRedisCommands: a view sends no Redis command while a call
// of the service's own was answered lately (readiness rests on it; the
// charts are read in the process).
func TestStatusPageRedisCommands(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		a.MustOK(t, event("e1", 1000, 1, "hello"))
		a.WaitSends(t, 1)
		views := &viewCommands{}
		a.Main.redis.rdb.AddHook(views)
		var b strings.Builder
		for range 3 {
			if err := a.admin.View(context.WithValue(context.Background(), viewKey{}, true), &b, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if got := views.n.Load(); got != 0 {
			t.Errorf("3 views sent %d Redis commands right after a message, want none", got)
		}
		if !strings.Contains(b.String(), "1 in the last hour") {
			t.Error("the charts do not hold the message")
		}
	}, singleServers...)
}
