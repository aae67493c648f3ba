package service

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/soak"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
	"github.com/vkcounter/vkcounter/internal/together"
	"github.com/vkcounter/vkcounter/vktest"
)

// viaProxy starts a proxy in front of tg's server and returns the
// REDIS_URL that reaches the server through it.
func viaProxy(t *testing.T, tg *redistest.Target) (*redistest.Proxy, string) {
	proxy := redistest.NewProxy(t, tg.Addr)
	return proxy, strings.Replace(tg.URL, tg.Addr, proxy.Addr(), 1)
}

// repliesByPeer returns the text of every accepted send per peer.
func repliesByPeer(sends []vktest.Send) map[int][]string {
	got := map[int][]string{}
	for _, s := range sends {
		got[s.PeerID] = append(got[s.PeerID], s.Message)
	}
	return got
}

// TestRedisStallSoak: Redis stalls for 10 s (a slow fork, an AOF rewrite, a
// failover) while two messages arrive, one with an event_id and one
// without. The webhook answers 503 with Retry-After at its deadline, the
// health, stats and metrics endpoints answer; once Redis is back, VK's
// re-deliveries are recognised: each message is counted once, answered
// once and added once to vk.messages, although Redis ran the first,
// abandoned calls late. A soak: a stall of 10 s of the machine's time.
func TestRedisStallSoak(t *testing.T) {
	soak.Test(t)
	t.Parallel() // mostly waits (a failover, a stall, an outage): alongside the other waiting tests
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		proxy, url := viaProxy(t, tg)
		a := startApp(t, tg, env("REDIS_URL", url, "WEBHOOK_TIMEOUT", "500ms"))
		servicetest.DropAccessKeys(t, tg, a.Prefix)
		a.MustOK(t, event("warm", 300, 1, "warm-up"))
		a.WaitSends(t, 1)

		noEventID := event("", 301, 1, "stalled text")
		withEventID := event("stall-ev", 302, 1, "stalled text")
		proxy.Stall()
		stalled := time.Now()
		for _, body := range [][]byte{noEventID, withEventID} {
			start := time.Now()
			code, _, hdr := a.Post(t, body, nil)
			if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Fatalf("webhook during the stall answered %d (Retry-After %q), want 503 with Retry-After", code, hdr.Get("Retry-After"))
			}
			t.Logf("webhook answered 503 after %v", time.Since(start).Round(time.Millisecond))
		}
		client := &http.Client{Timeout: 2 * time.Second}
		for _, u := range []string{a.URL("/healthz"), a.AdminURL("/healthz"), a.AdminURL("/stats"), a.AdminURL("/metrics")} {
			resp, err := client.Get(u)
			if err != nil {
				t.Fatalf("%s during the stall: %v", u, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s during the stall: %d", u, resp.StatusCode)
			}
		}
		// The fault under test: the proxy holds Redis's answers for 10 s
		// of the wall clock the service's deadlines run on.
		time.Sleep(time.Until(stalled.Add(10 * time.Second)))
		proxy.Resume()

		// VK re-delivers both; the late runs may still be finishing.
		for _, body := range [][]byte{noEventID, withEventID} {
			eventually.NoError(t, 5*time.Second, "re-delivery", func() error {
				if code, got, _ := a.Post(t, body, nil); code != 200 || got != "ok" {
					return fmt.Errorf("re-delivery answered %d %q", code, got)
				}
				return nil
			})
		}
		a.MustOK(t, event("after", 303, 1, "stalled text"))
		a.WaitSends(t, 4)
		// Not waitSettled: a reply whose acknowledgement the stall cut
		// stays in the outbox until OUTBOX_CLAIM_AFTER recovers it (and VK
		// recognises its random_id).
		// A window for a second reply, if any, to arrive: no condition
		// marks a duplicate that has not happened, and the outbox keeps the
		// reply whose acknowledgement the stall cut, so it cannot be read
		// empty instead.
		time.Sleep(300 * time.Millisecond)
		got := repliesByPeer(a.VK.Sends())
		stalledReplies := append(slices.Clone(got[301]), got[302]...)
		slices.Sort(stalledReplies)
		if !slices.Equal(stalledReplies, []string{"0", "1"}) || !slices.Equal(got[303], []string{"2"}) {
			t.Errorf("replies %v; want one each: 0 and 1 to the stalled messages, 2 to the next", got)
		}
		eventually.NoError(t, 5*time.Second, "vk.messages", func() error {
			total, err := a.counters.stores.Access.Total(context.Background(), bot.MessagesCounter)
			if err != nil || total != 4 {
				return fmt.Errorf("vk.messages = %d, %v; want 4: each message once", total, err)
			}
			return nil
		})
		if st := a.bot.bot.Stats(); st.Late != 2 || st.Received != 6 || st.Duplicates != 2 {
			t.Errorf("bot stats %+v; want 2 late, 6 received of which 2 duplicates", st)
		}
	}, singleServers...)
}

// TestConcurrentRedeliveries: VK delivers one event 50 times at once; it is
// counted once and answered with exactly one messages.send.
func TestConcurrentRedeliveries(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		ev := event("dup-50", 501, 1, "fifty")
		together.Run(t, 50, func(int) (struct{}, error) {
			if code, got, _ := a.Post(t, ev, nil); code != 200 || got != "ok" {
				return struct{}{}, fmt.Errorf("answered %d %q", code, got)
			}
			return struct{}{}, nil
		})
		a.MustOK(t, event("next", 502, 1, "fifty"))
		a.WaitSends(t, 2)
		a.waitSettled(t)
		if got := repliesByPeer(a.VK.Sends()); !slices.Equal(got[501], []string{"0"}) || !slices.Equal(got[502], []string{"1"}) {
			t.Errorf("sends %v; want one send of 0 for the event delivered 50 times, then 1", got)
		}
	})
}

// TestLongEventIDAndLooseFields: an event_id of 300 characters and a date
// sent as a string are accepted; the long id still deduplicates.
func TestLongEventIDAndLooseFields(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		long := strings.Repeat("e", 300)
		ev := event(long, 601, 1, "long id")
		for range 2 {
			a.MustOK(t, ev)
		}
		a.MustOK(t, bytes.Replace(event("loose", 602, 1, "long id"), []byte(`"date":1764115200`), []byte(`"date":"2025-11-26"`), 1))
		a.WaitSends(t, 2)
		a.waitSettled(t)
		if got := repliesByPeer(a.VK.Sends()); !slices.Equal(got[601], []string{"0"}) || !slices.Equal(got[602], []string{"1"}) {
			t.Errorf("sends %v; want 0 once for the long event id, then 1", got)
		}
	}, redistest.Mini)
}

// TestVKOutageSoak: the VK API is unreachable for 12 s. The webhook goes on
// counting, /readyz stays ready (the outbox keeps the replies), the outage
// is logged at warn at once, and every reply goes out exactly once within
// about two seconds of VK coming back. A soak: an outage of 12 s of the machine's time.
func TestVKOutageSoak(t *testing.T) {
	soak.Test(t)
	t.Parallel() // mostly waits (a failover, a stall, an outage): alongside the other waiting tests
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		var log syncbuf.Buffer
		a := startAppLog(t, tg, nil, &log)
		a.VK.SetOutage(vktest.Unreachable)
		for i := range 5 {
			a.MustOK(t, event(fmt.Sprintf("out%d", i), 700+i, 1, "during the outage"))
		}
		eventually.NoError(t, 5*time.Second, "outage warning", func() error {
			if !strings.Contains(log.String(), "VK API not answering") {
				return fmt.Errorf("no warn line about the outage yet; log:\n%s", log.String())
			}
			return nil
		})
		if n := a.bot.bot.ConsecutiveVKFailures(); n == 0 {
			t.Error("no consecutive VK failures counted during the outage")
		}
		resp, err := http.Get(a.AdminURL("/readyz"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz during a VK outage: %d, want 200 (the outbox absorbs it)", resp.StatusCode)
		}
		time.Sleep(12 * time.Second) // the outage under test, on the service's wall clock
		a.VK.SetOutage(vktest.Up)
		back := time.Now()
		a.WaitSends(t, 5)
		if took := time.Since(back); took > 5*time.Second {
			t.Errorf("replies resumed %v after VK came back, want about 2s", took)
		}
		a.waitSettled(t)
		got := repliesByPeer(a.VK.Sends())
		for i := range 5 {
			if !slices.Equal(got[700+i], []string{"0", "1", "2", "3", "4"}[i:i+1]) {
				t.Errorf("peer %d got %v, want exactly one reply", 700+i, got[700+i])
			}
		}
		if n := a.bot.bot.ConsecutiveVKFailures(); n != 0 {
			t.Errorf("consecutive failures %d after recovery, want 0", n)
		}
	}, redistest.Mini)
}

// TestShutdownWithBacklog: SIGTERM while VK refuses every send. With a real
// Redis the replies stay in the outbox for the next start: Close succeeds
// and says how many are left. With the embedded Redis they would be lost:
// Close fails and says so.
func TestShutdownWithBacklog(t *testing.T) {
	for _, embedded := range []bool{false, true} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			var tg *redistest.Target
			if !embedded {
				tg = redistest.Open(t, redistest.Mini)
			}
			var log syncbuf.Buffer
			a := startAppLog(t, tg, env("SHUTDOWN_TIMEOUT", "300ms"), &log)
			a.VK.FailAlways(10)
			for i := range 3 {
				a.MustOK(t, event(fmt.Sprintf("left%d", i), 800+i, 1, "left behind"))
			}
			err := a.Close()
			if embedded {
				if err == nil || !strings.Contains(err.Error(), "3 replies") || !strings.Contains(err.Error(), "lost") {
					t.Errorf("Close = %v, want an error saying 3 replies are lost", err)
				}
				return
			}
			if err != nil {
				t.Errorf("Close = %v, want nil: the replies wait in Redis", err)
			}
			if !strings.Contains(log.String(), `"replies_left":3`) {
				t.Errorf("no line saying 3 replies are left; log:\n%s", log.String())
			}
		})
	}
}

// TestCounterConnLimit: the counter port's connection limit leaves open
// files for the webhook and Redis, whatever was configured.
func TestCounterConnLimit(t *testing.T) {
	for _, tc := range []struct{ configured, fdLimit, want int }{
		{10000, 1 << 20, 10000},
		{10000, 20000, 10000},
		{10000, 4096, 3072},
		{10000, 1024, 512},
		{0, 4096, 0},  // unlimited, as configured, with a warning
		{100, 0, 100}, // limit unknown
	} {
		m := &Main{cfg: config.Config{CounterMaxConnections: tc.configured}}
		if got := m.counterConnLimit(tc.fdLimit); got != tc.want {
			t.Errorf("COUNTER_MAX_CONNECTIONS %d with %d open files: %d, want %d", tc.configured, tc.fdLimit, got, tc.want)
		}
	}
}

// TestHTTPConnLimit: each HTTP server's connection limit leaves open
// files for the other, the counter port at its limit and Redis.
func TestHTTPConnLimit(t *testing.T) {
	for _, tc := range []struct {
		configured, counter int
		counterAddr         string
		fdLimit, want       int
	}{
		{4096, 10000, "127.0.0.1:11215", 1 << 20, 4096},
		{4096, 10000, "127.0.0.1:11215", 20000, 4096},
		{4096, 10000, "127.0.0.1:11215", 4096, 384}, // the counter port takes 3072
		{4096, 10000, CounterOff, 4096, 1920},
		{4096, 100, "127.0.0.1:11215", 4096, 1870},
		{4096, 0, "127.0.0.1:11215", 1024, 128}, // an unlimited counter port counted at its room
		{4096, 10000, "127.0.0.1:11215", 300, 16},
		{0, 10000, "127.0.0.1:11215", 4096, 0},  // unlimited, as configured, with a warning
		{100, 10000, "127.0.0.1:11215", 0, 100}, // limit unknown
	} {
		m := &Main{cfg: config.Config{HTTPMaxConnections: tc.configured, CounterMaxConnections: tc.counter, CounterAddr: tc.counterAddr}}
		if got := m.httpConnLimit(tc.fdLimit); got != tc.want {
			t.Errorf("HTTP_MAX_CONNECTIONS %d (counter port %s, %d) with %d open files: %d, want %d", tc.configured, tc.counterAddr, tc.counter, tc.fdLimit, got, tc.want)
		}
	}
}
