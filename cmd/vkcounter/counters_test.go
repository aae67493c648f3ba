package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// mustCnt runs `vkcounter cnt` against the program's counter port and
// requires exit 0 and the exact output.
func (a *app) mustCnt(t *testing.T, want string, args ...string) {
	t.Helper()
	if err := a.cntIs(t, want, args...); err != nil {
		t.Fatal(err)
	}
}

// waitCnt is mustCnt for counters the bot feeds: they are written in
// batches (ActivityFlush), so it polls until want shows up.
func (a *app) waitCnt(t *testing.T, want string, args ...string) {
	t.Helper()
	eventually.NoError(t, 5*time.Second, "cnt", func() error { return a.cntIs(t, want, args...) })
}

// cntIs runs `vkcounter cnt` against the program's counter port and says
// how its exit or output differ from 0 and want.
func (a *app) cntIs(t *testing.T, want string, args ...string) error {
	code, stdout, stderr := cnt(t, context.Background(), append([]string{"-addr", a.CounterAddr()}, args...)...)
	if code != 0 || stdout != want {
		return fmt.Errorf("cnt %v: exit %d, stdout %q, stderr %q; want %q", args, code, stdout, stderr, want)
	}
	return nil
}

// TestCntAgainstTheProgram: `vkcounter cnt hit` against the running
// program's counter port counts in the bot's Redis, under KEY_PREFIX+"a:",
// and the HTTP API serves the same counters.
func TestCntAgainstTheProgram(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, servicetest.WithCounterPort())
		servicetest.DropAccessKeys(t, tg, a.Prefix)
		a.mustCnt(t, "1\n2\n1 1\n2\n", "hit", "page", "hit", "page", "visit", "room", "u1", "0", "total", "page")
		a.MustAPI(t, "GET", "/counters/access/page", "", 200, `{"name":"page","total":2}`)
		a.MustAPI(t, "POST", "/counters/access/page", "", 200, `{"name":"page","total":3}`)
		a.MustAPI(t, "POST", "/counters/participants/room/visit", `{"key":"u2"}`, 200, `{"name":"room","key":"u2","active":2,"new":true}`)
		a.mustCnt(t, "3\n2\n", "total", "page", "active", "room", "0")
		a.MustAPI(t, "GET", "/counters/access?prefix=pa", "", 200, `{"prefix":"pa","counters":[{"name":"page","total":3}],"sum":3,"cursor":""}`)
		keys := redistest.Keys(t, tg.Client, a.Prefix+"a:")
		slices.Sort(keys)
		if !slices.Equal(keys, []string{a.Prefix + "a:index", a.Prefix + "a:{page}"}) {
			t.Fatalf("access keys %v, want the one counter and the name index under KEY_PREFIX a:", keys)
		}
		if keys := redistest.Keys(t, tg.Client, a.Prefix+"p:"); len(keys) != 1 {
			t.Fatalf("participant keys %v, want one set under KEY_PREFIX p:", keys)
		}
	})
}

// TestBotFeedsActivityCounters: messages to the bot move vk.messages and
// vk.users; a retried event moves neither.
func TestBotFeedsActivityCounters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, servicetest.WithCounterPort())
		servicetest.DropAccessKeys(t, tg, a.Prefix)
		a.mustCnt(t, "0\n", "active", "vk.users", "300")
		a.MustOK(t, servicetest.Event("e1", 1000, 1, "hello"))
		if code, body, _ := a.Post(t, servicetest.Event("e1", 1000, 1, "hello"), map[string]string{"X-Retry-Counter": "1"}); code != 200 || body != "ok" {
			t.Fatalf("retry answered %d %q", code, body)
		}
		a.MustOK(t, servicetest.Event("e2", 1000, 2, "again")) // the same user
		a.waitCnt(t, "2\n1\n", "total", "vk.messages", "active", "vk.users", "300")
		a.MustOK(t, servicetest.Event("e3", 2000, 1, "hello")) // another user
		if code, body, _ := a.Post(t, servicetest.Event("e3", 2000, 1, "hello"), map[string]string{"X-Retry-Counter": "2"}); code != 200 || body != "ok" {
			t.Fatalf("retry answered %d %q", code, body)
		}
		a.waitCnt(t, "3\n2\n", "total", "vk.messages", "active", "vk.users", "300")
		a.MustAPI(t, "GET", "/counters/access/vk.messages", "", 200, `{"name":"vk.messages","total":3}`)
		a.MustAPI(t, "GET", "/counters/participants/vk.users?timeout=300", "", 200, `{"name":"vk.users","active":2}`)
		a.waitCnt(t, "2\n", "ucount", bot.UsersDay(time.Now()))
		checkStatsCounters(t, a, `{"store":"redis","vk.messages":{"total":3},"vk.users":{"active":2,"timeout_seconds":300,`+today(2)+`}}`)
		a.WaitSends(t, 3) // one reply per message: retries are not answered twice
	})
}

// today is the "today" field of vk.users in /stats with n senders today.
func today(n int) string {
	return fmt.Sprintf(`"today":{"counter":%q,"estimate":%d}`, bot.UsersDay(time.Now()), n)
}

// checkStatsCounters requires /stats to report want as its counters, once
// the bot's last batch is written. /stats shows the figures as the bot last
// wrote them, each with its age, which must be a fresh one.
func checkStatsCounters(t *testing.T, a *app, want string) {
	t.Helper()
	eventually.NoError(t, 5*time.Second, "/stats", func() error {
		resp, err := http.Get(a.AdminURL("/stats"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var stats struct{ Counters map[string]any }
		if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
			return err
		}
		for _, name := range []string{bot.MessagesCounter, bot.UsersCounter} {
			c, _ := stats.Counters[name].(map[string]any)
			if age, _ := c["age_seconds"].(float64); age < 0 || age > 60 {
				return fmt.Errorf("/stats %s: age_seconds %v, want a fresh reading", name, c["age_seconds"])
			}
			delete(c, "age_seconds")
		}
		if today, _ := stats.Counters[bot.UsersCounter].(map[string]any)["today"].(map[string]any); today != nil {
			if age, _ := today["age_seconds"].(float64); age < 0 || age > 60 {
				return fmt.Errorf("/stats %s today: age_seconds %v, want a fresh reading", bot.UsersCounter, today["age_seconds"])
			}
			delete(today, "age_seconds")
		}
		if got, _ := json.Marshal(stats.Counters); string(got) != want {
			return fmt.Errorf("/stats counters %s, want %s", got, want)
		}
		return nil
	})
}

// TestInstancesShareRedisCounters: two instances on one Redis with one
// KEY_PREFIX count into the same counters.
func TestInstancesShareRedisCounters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		servicetest.DropAccessKeys(t, tg, prefix)
		a := startApp(t, tg, servicetest.WithCounterPort("KEY_PREFIX", prefix))
		b := startApp(t, tg, servicetest.WithCounterPort("KEY_PREFIX", prefix))
		a.mustCnt(t, "1\n", "hit", "shared")
		b.mustCnt(t, "2\n", "hit", "shared")
		a.MustOK(t, servicetest.Event("x1", 7, 1, "hi"))
		b.MustOK(t, servicetest.Event("x2", 8, 1, "hi"))
		a.waitCnt(t, "2\n2\n", "total", "vk.messages", "active", "vk.users", "300")
		b.waitCnt(t, "2\n2\n", "total", "vk.messages", "active", "vk.users", "300")
	}, servicetest.SingleServers...)
}

// TestCountersFileStore: COUNTERS_STORE=file serves an existing BBS count
// directory and bbs.cnt, and keeps the bot's counters in files next to them.
func TestCountersFileStore(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	if err := os.MkdirAll(count, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"925", "924", "923", "922", "921"} {
		if err := os.WriteFile(filepath.Join(count, fmt.Sprintf("count%d.dat", i)), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := startApp(t, nil, servicetest.WithCounterPort("COUNTERS_STORE", "file", "COUNTERS_DIR", dir))
	a.mustCnt(t, "926\n", "hit", "default")
	if b, err := os.ReadFile(filepath.Join(count, "count4.dat")); err != nil || string(b) != "926" {
		t.Fatalf("count4.dat = %q, %v; want the BBS's minimum file rewritten", b, err)
	}
	a.MustOK(t, servicetest.Event("f1", 4242, 1, "file"))
	checkStatsCounters(t, a, `{"store":"file","vk.messages":{"total":1},"vk.users":{"active":1,"timeout_seconds":300,`+today(1)+`}}`)
	if _, err := os.Stat(filepath.Join(count, "names", "vk.messages", "count0.dat")); err != nil {
		t.Fatalf("vk.messages not in the count directory: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bbs.cnt.d", "vk.users"))
	if err != nil || !strings.HasPrefix(string(b), "4242,") {
		t.Fatalf("vk.users file = %q, %v; want the sender's line", b, err)
	}
	checkStatsCounters(t, a, `{"store":"file","vk.messages":{"total":1},"vk.users":{"active":1,"timeout_seconds":300,`+today(1)+`}}`)
}

// TestCountersMemoryStore: COUNTERS_STORE=memory keeps the counters out of
// Redis.
func TestCountersMemoryStore(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, servicetest.WithCounterPort("COUNTERS_STORE", "memory"))
		a.mustCnt(t, "1\n1 1\n", "hit", "m", "visit", "room", "k", "0")
		a.MustOK(t, servicetest.Event("m1", 5, 1, "memory"))
		checkStatsCounters(t, a, `{"store":"memory","vk.messages":{"total":1},"vk.users":{"active":1,"timeout_seconds":300,`+today(1)+`}}`)
		if keys := append(redistest.Keys(t, tg.Client, a.Prefix+"a:"), redistest.Keys(t, tg.Client, a.Prefix+"p:")...); len(keys) != 0 {
			t.Fatalf("memory store wrote Redis keys %v", keys)
		}
	}, redistest.Mini)
}

// TestCountersStoreDown: with the counters' Redis unreachable, the counter
// port answers Store unavailable on the same connection, the HTTP API
// answers 503 JSON, and both work again once Redis is back.
func TestCountersStoreDown(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		proxy := redistest.NewProxy(t, tg.Addr)
		url := strings.Replace(tg.URL, tg.Addr, proxy.Addr(), 1)
		a := startApp(t, tg, servicetest.WithCounterPort("REDIS_URL", url, "COUNTERS_TIMEOUT", "500ms"))
		servicetest.DropAccessKeys(t, tg, a.Prefix)
		a.mustCnt(t, "1\n", "hit", "down")

		proxy.Cut()
		code, stdout, stderr := cnt(t, context.Background(), "-addr", a.CounterAddr(), "hit", "down")
		if code != 1 || stdout != "" || stderr != "ERROR: 86 Store unavailable\n" {
			t.Fatalf("cnt hit with Redis down: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		a.MustAPI(t, "POST", "/counters/access/down", "", 503, `{"error":"Store unavailable"}`)
		a.MustAPI(t, "POST", "/counters/participants/p/visit", `{"key":"k"}`, 503, `{"error":"Store unavailable"}`)

		proxy.Restore()
		a.mustCnt(t, "2\n", "hit", "down")
		a.MustAPI(t, "GET", "/counters/access/down", "", 200, `{"name":"down","total":2}`)
	}, servicetest.SingleServers...)
}

// TestCountersHTTPToken: with COUNTERS_HTTP_TOKEN the /counters/ API needs
// the bearer token; the webhook and health endpoints do not.
func TestCountersHTTPToken(t *testing.T) {
	a := startApp(t, nil, servicetest.WithCounterPort("COUNTERS_HTTP_TOKEN", "s3cret"))
	call := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, a.URL("/counters/access/pages"), nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"s3cret", 401}, {"Bearer s3cret", 200}} {
		if got := call(tc.auth); got != tc.want {
			t.Errorf("Authorization %q: status %d, want %d", tc.auth, got, tc.want)
		}
	}
	a.mustCnt(t, "1\n", "total", "pages") // only the authorised hit counted
	a.MustOK(t, servicetest.Event("tok1", 1, 1, "no token needed"))
}
