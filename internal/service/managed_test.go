package service

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestManagedProfile runs the service as a managed service's user: no
// CONFIG, no INFO, no CLIENT (ElastiCache's, Memorystore's and Upstash's
// users are so restricted, each in part). It starts; 300 webhooks (100
// texts, each 3 times) are answered 200 and their replies are exact;
// /readyz answers 200; on the counter port, a resource acquire on a new
// name (the resource store in Redis) and a counter on a new name are
// granted, with the counters' headroom guard unknown (shown in /stats, the
// metrics and the status page).
func TestManagedProfile(t *testing.T) {
	addr := redistest.StartServer(t, "--maxmemory", "256mb", "--maxmemory-policy", "noeviction")
	tg := &redistest.Target{Kind: redistest.Real, Addr: addr, URL: redistest.ACLUser(t, addr, "managed", redistest.ManagedProfile...)}
	var log syncbuf.Buffer
	a := startAppLog(t, tg, map[string]string{"RESOURCE_STORE": "redis", "RESOURCE_LEASE": "1s", "COUNTER_ADDR": "127.0.0.1:0",
		"LOG_LEVEL": "info", "WEBHOOK_TIMEOUT": "30s"}, &log)

	postRepeated(t, a, 100, 3)
	if code, body := get(t, a.AdminURL("/readyz")); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	// The counters' headroom guard cannot read INFO: it says so in /stats,
	// the metrics and the status page.
	if code, body := get(t, a.AdminURL("/stats")); code != 200 || !strings.Contains(body, `"unknown":"INFO memory refused`) {
		t.Errorf("/stats: %d, want redis_memory.unknown: %s", code, body)
	}
	if metrics := a.ScrapeMetrics(t); !strings.Contains(metrics, "\nvkcounter_counters_redis_headroom_unknown 1\n") {
		t.Error("vkcounter_counters_redis_headroom_unknown is not 1")
	}
	if code, body := get(t, a.AdminURL("/")); code != 200 || !strings.Contains(body, "INFO memory refused") {
		t.Errorf("status page: %d, want the guard unknown", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := servicetest.DialCounters(ctx, t, a.CounterAddr())
	// A new store refuses acquires for one lease (the birth rule): 1 s.
	eventually.NoError(t, 20*time.Second, "an acquire on a new name granted", func() error {
		_, err := c.Acquire(ctx, "managed-jobs", 1, 4)
		return err
	})
	if _, err := c.Acquire(ctx, "managed-jobs-2", 1, 4); err != nil {
		t.Errorf("a second new name: %v", err)
	}
	if _, err := c.Hit(ctx, "managed-pages"); err != nil {
		t.Errorf("an access counter on a new name: %v", err)
	}
}

// TestUserWithoutFunctions: a Redis 7 user whose ACL refuses FCALL and
// FUNCTION (a managed service's user may be so restricted) has the
// counting scripts run with EVALSHA: the service starts, says so once at
// start, and its replies are exact; a user who may run functions is told
// nothing.
func TestUserWithoutFunctions(t *testing.T) {
	addr := redistest.StartServer(t)
	for _, c := range []struct {
		user  string
		rules []string
		told  bool
	}{
		{"nofunctions", append(slices.Clone(redistest.ManagedProfile), "-fcall", "-function"), true},
		{"functions", redistest.ManagedProfile, false},
	} {
		t.Run(c.user, func(t *testing.T) {
			tg := &redistest.Target{Kind: redistest.Real, Addr: addr, URL: redistest.ACLUser(t, addr, c.user, c.rules...)}
			var log syncbuf.Buffer
			a := startAppLog(t, tg, map[string]string{"LOG_LEVEL": "info", "KEY_PREFIX": c.user + ":"}, &log)
			postRepeated(t, a, 10, 2)
			if told := strings.Count(log.String(), "Redis does not run functions for this user"); told != map[bool]int{true: 1, false: 0}[c.told] {
				t.Errorf("told %d times that Redis runs no functions, want told %v:\n%s", told, c.told, log.String())
			}
		})
	}
}

// postRepeated posts texts texts, each times times from as many peers,
// each webhook answered 200 ok, and checks that every peer got one reply,
// the text's count before it.
func postRepeated(t *testing.T, a *app, texts, times int) {
	t.Helper()
	for round := range times {
		for i := range texts {
			peer := 100000 + i*times + round
			if code, body, _ := a.Post(t, event(fmt.Sprintf("m%d-%d", i, round), peer, 1, fmt.Sprintf("text %d", i)), nil); code != 200 || body != "ok" {
				t.Fatalf("webhook %d of text %d: %d %q, want 200 ok", round, i, code, body)
			}
		}
	}
	got := map[int]string{}
	for _, s := range a.WaitSends(t, texts*times) {
		if _, dup := got[s.PeerID]; dup {
			t.Errorf("a second reply to peer %d: %q", s.PeerID, s.Message)
		}
		got[s.PeerID] = s.Message
	}
	for i := range texts {
		for round := range times {
			if peer := 100000 + i*times + round; got[peer] != strconv.Itoa(round) {
				t.Errorf("text %d, time %d: reply %q, want %q", i, round+1, got[peer], strconv.Itoa(round))
			}
		}
	}
}
