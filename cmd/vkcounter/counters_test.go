package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
)

// withCounterPort is the env that opens the counter port on a free
// loopback port.
var withCounterPort = map[string]string{"COUNTER_ADDR": "127.0.0.1:0"}

// env returns withCounterPort plus the pairs kv.
func env(kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range withCounterPort {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// api sends a request to the program's HTTP API and returns the status and
// the body without its final newline.
func (a *app) api(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.url(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, strings.TrimSuffix(string(b), "\n")
}

// mustAPI is api that requires the status code and the exact body.
func (a *app) mustAPI(t testing.TB, method, path, body string, code int, want string) {
	t.Helper()
	if got, b := a.api(t, method, path, body); got != code || b != want {
		t.Fatalf("%s %s: %d %s; want %d %s", method, path, got, b, code, want)
	}
}

// mustCnt runs `vkcounter cnt` against the program's counter port and
// requires exit 0 and the exact output.
func (a *app) mustCnt(t *testing.T, want string, args ...string) {
	t.Helper()
	code, stdout, stderr := cnt(t, context.Background(), append([]string{"-addr", a.CounterAddr()}, args...)...)
	if code != 0 || stdout != want {
		t.Fatalf("cnt %v: exit %d, stdout %q, stderr %q; want %q", args, code, stdout, stderr, want)
	}
}

// waitCnt is mustCnt for counters the bot feeds: they are written in
// batches (ActivityFlush), so it polls until want shows up.
func (a *app) waitCnt(t *testing.T, want string, args ...string) {
	t.Helper()
	eventually.NoError(t, 5*time.Second, "cnt", func() error {
		code, stdout, stderr := cnt(t, context.Background(), append([]string{"-addr", a.CounterAddr()}, args...)...)
		if code != 0 || stdout != want {
			return fmt.Errorf("cnt %v: exit %d, stdout %q, stderr %q; want %q", args, code, stdout, stderr, want)
		}
		return nil
	})
}

// dropAccessKeys deletes the access counters' keys of a (they never expire)
// when the test ends, one by one since a cluster spreads them over slots.
func dropAccessKeys(t *testing.T, tg *redistest.Target, prefix string) {
	t.Cleanup(func() {
		// Access and unique counters do not expire.
		for _, k := range append(redistest.Keys(t, tg.Client, prefix+"a:"), redistest.Keys(t, tg.Client, prefix+"u:")...) {
			tg.Client.Del(context.Background(), k)
		}
	})
}

// TestCntAgainstTheProgram: `vkcounter cnt hit` against the running
// program's counter port counts in the bot's Redis, under KEY_PREFIX+"a:",
// and the HTTP API serves the same counters.
func TestCntAgainstTheProgram(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, withCounterPort)
		dropAccessKeys(t, tg, a.prefix)
		a.mustCnt(t, "1\n2\n1 1\n2\n", "hit", "page", "hit", "page", "visit", "room", "u1", "0", "total", "page")
		a.mustAPI(t, "GET", "/counters/access/page", "", 200, `{"name":"page","total":2}`)
		a.mustAPI(t, "POST", "/counters/access/page", "", 200, `{"name":"page","total":3}`)
		a.mustAPI(t, "POST", "/counters/participants/room/visit", `{"key":"u2"}`, 200, `{"name":"room","key":"u2","active":2,"new":true}`)
		a.mustCnt(t, "3\n2\n", "total", "page", "active", "room", "0")
		a.mustAPI(t, "GET", "/counters/access?prefix=pa", "", 200, `{"prefix":"pa","counters":[{"name":"page","total":3}],"sum":3,"cursor":""}`)
		keys := redistest.Keys(t, tg.Client, a.prefix+"a:")
		slices.Sort(keys)
		if !slices.Equal(keys, []string{a.prefix + "a:index", a.prefix + "a:{page}"}) {
			t.Fatalf("access keys %v, want the one counter and the name index under KEY_PREFIX a:", keys)
		}
		if keys := redistest.Keys(t, tg.Client, a.prefix+"p:"); len(keys) != 1 {
			t.Fatalf("participant keys %v, want one set under KEY_PREFIX p:", keys)
		}
	})
}

// TestBotFeedsActivityCounters: messages to the bot move vk.messages and
// vk.users; a retried event moves neither.
func TestBotFeedsActivityCounters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, withCounterPort)
		dropAccessKeys(t, tg, a.prefix)
		a.mustCnt(t, "0\n", "active", "vk.users", "300")
		a.mustOK(t, event("e1", 1000, 1, "hello"))
		if code, body, _ := a.post(t, event("e1", 1000, 1, "hello"), map[string]string{"X-Retry-Counter": "1"}); code != 200 || body != "ok" {
			t.Fatalf("retry answered %d %q", code, body)
		}
		a.mustOK(t, event("e2", 1000, 2, "again")) // the same user
		a.waitCnt(t, "2\n1\n", "total", "vk.messages", "active", "vk.users", "300")
		a.mustOK(t, event("e3", 2000, 1, "hello")) // another user
		if code, body, _ := a.post(t, event("e3", 2000, 1, "hello"), map[string]string{"X-Retry-Counter": "2"}); code != 200 || body != "ok" {
			t.Fatalf("retry answered %d %q", code, body)
		}
		a.waitCnt(t, "3\n2\n", "total", "vk.messages", "active", "vk.users", "300")
		a.mustAPI(t, "GET", "/counters/access/vk.messages", "", 200, `{"name":"vk.messages","total":3}`)
		a.mustAPI(t, "GET", "/counters/participants/vk.users?timeout=300", "", 200, `{"name":"vk.users","active":2}`)
		a.waitCnt(t, "2\n", "ucount", bot.UsersDay(time.Now()))
		checkStatsCounters(t, a, `{"store":"redis","vk.messages":{"total":3},"vk.users":{"active":2,"timeout_seconds":300,`+today(2)+`}}`)
		a.waitSends(t, 3) // one reply per message: retries are not answered twice
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
		resp, err := http.Get(a.adminURL("/stats"))
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
		dropAccessKeys(t, tg, prefix)
		a := startApp(t, tg, env("KEY_PREFIX", prefix))
		b := startApp(t, tg, env("KEY_PREFIX", prefix))
		a.mustCnt(t, "1\n", "hit", "shared")
		b.mustCnt(t, "2\n", "hit", "shared")
		a.mustOK(t, event("x1", 7, 1, "hi"))
		b.mustOK(t, event("x2", 8, 1, "hi"))
		a.waitCnt(t, "2\n2\n", "total", "vk.messages", "active", "vk.users", "300")
		b.waitCnt(t, "2\n2\n", "total", "vk.messages", "active", "vk.users", "300")
	}, singleServers...)
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
	a := startApp(t, nil, env("COUNTERS_STORE", "file", "COUNTERS_DIR", dir))
	a.mustCnt(t, "926\n", "hit", "default")
	if b, err := os.ReadFile(filepath.Join(count, "count4.dat")); err != nil || string(b) != "926" {
		t.Fatalf("count4.dat = %q, %v; want the BBS's minimum file rewritten", b, err)
	}
	a.mustOK(t, event("f1", 4242, 1, "file"))
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
		a := startApp(t, tg, env("COUNTERS_STORE", "memory"))
		a.mustCnt(t, "1\n1 1\n", "hit", "m", "visit", "room", "k", "0")
		a.mustOK(t, event("m1", 5, 1, "memory"))
		checkStatsCounters(t, a, `{"store":"memory","vk.messages":{"total":1},"vk.users":{"active":1,"timeout_seconds":300,`+today(1)+`}}`)
		if keys := append(redistest.Keys(t, tg.Client, a.prefix+"a:"), redistest.Keys(t, tg.Client, a.prefix+"p:")...); len(keys) != 0 {
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
		a := startApp(t, tg, env("REDIS_URL", url, "COUNTERS_TIMEOUT", "500ms"))
		dropAccessKeys(t, tg, a.prefix)
		a.mustCnt(t, "1\n", "hit", "down")

		proxy.Cut()
		code, stdout, stderr := cnt(t, context.Background(), "-addr", a.CounterAddr(), "hit", "down")
		if code != 1 || stdout != "" || stderr != "ERROR: 86 Store unavailable\n" {
			t.Fatalf("cnt hit with Redis down: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		a.mustAPI(t, "POST", "/counters/access/down", "", 503, `{"error":"Store unavailable"}`)
		a.mustAPI(t, "POST", "/counters/participants/p/visit", `{"key":"k"}`, 503, `{"error":"Store unavailable"}`)

		proxy.Restore()
		a.mustCnt(t, "2\n", "hit", "down")
		a.mustAPI(t, "GET", "/counters/access/down", "", 200, `{"name":"down","total":2}`)
	}, singleServers...)
}

// TestCountersHTTPToken: with COUNTERS_HTTP_TOKEN the /counters/ API needs
// the bearer token; the webhook and health endpoints do not.
func TestCountersHTTPToken(t *testing.T) {
	a := startApp(t, nil, env("COUNTERS_HTTP_TOKEN", "s3cret"))
	call := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, a.url("/counters/access/pages"), nil)
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
	a.mustOK(t, event("tok1", 1, 1, "no token needed"))
}
