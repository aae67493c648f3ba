package participant_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestRedisKeys pins the key layout: one sorted set per name, named
// prefix + "p:{" + name + "}", scored by last-seen Unix seconds, expiring
// timeout+1 seconds after the last Visit or VisitMany.
func TestRedisKeys(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		s := newRedis(t, tg.Client, prefix).WithClock(newClock(bbsNow).Now)
		visit(t, s, "vk.users", "42", 60*time.Second, 1, true)
		visit(t, s, "a}b", "7", 60*time.Second, 1, true)
		visitMany(t, s, "many", []string{"1", "2", "1"}, 120*time.Second, 2, 2)

		// TTLs first: the scan below may take seconds on a busy shared server.
		key := prefix + "p:{vk.users}"
		if ttl, err := tg.Client.TTL(ctx, key).Result(); err != nil || ttl <= 59*time.Second || ttl > 61*time.Second {
			t.Fatalf("TTL = %v, %v; want 61s", ttl, err)
		}
		if ttl, err := tg.Client.TTL(ctx, prefix+"p:{many}").Result(); err != nil || ttl <= 119*time.Second || ttl > 121*time.Second {
			t.Fatalf("TTL after VisitMany = %v, %v; want 121s", ttl, err)
		}
		if score, err := tg.Client.ZScore(ctx, key, "42").Result(); err != nil || score != bbsNow {
			t.Fatalf("ZSCORE = %v, %v; want %d", score, err, bbsNow)
		}
		if scores, err := tg.Client.ZMScore(ctx, prefix+"p:{many}", "1", "2").Result(); err != nil || !slices.Equal(scores, []float64{bbsNow, bbsNow}) {
			t.Fatalf("ZMSCORE after VisitMany = %v, %v; want %d for both", scores, err, bbsNow)
		}

		got := redistest.Keys(t, tg.Client, prefix)
		slices.Sort(got)
		if want := []string{prefix + "p:{a}b}", prefix + "p:{many}", prefix + "p:{vk.users}"}; !slices.Equal(got, want) {
			t.Fatalf("keys = %q, want %q", got, want)
		}
		leave(t, s, "vk.users", "42", 0, true)
		if n, err := tg.Client.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS after the last key left = %d, %v; want 0", n, err)
		}
	})
}

// TestRedisServerTime checks that without WithClock the stores use the
// server's TIME, which miniredis lets the test set.
func TestRedisServerTime(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		s := newRedis(t, tg.Client, prefix)
		tg.Mini.SetTime(time.Unix(1762615400, 0))
		visit(t, s, users, "3789011499", fiveMins, 1, true)
		if score, err := tg.Client.ZScore(ctx, prefix+"p:{users}", "3789011499").Result(); err != nil || score != 1762615400 {
			t.Fatalf("ZSCORE = %v, %v; want the server's time 1762615400", score, err)
		}
		tg.Mini.SetTime(time.Unix(1762615700, 0))
		wantActive(t, s, users, fiveMins, 1)
		tg.Mini.SetTime(time.Unix(1762615701, 0))
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "3789011499", fiveMins, 1, true)

		// An idle set disappears once its last key has expired.
		tg.Mini.FastForward(fiveMins + time.Second)
		if tg.Mini.Exists(prefix + "p:{users}") {
			t.Fatal("the set outlived its keys")
		}
	}, redistest.Mini)
}

// TestRedisServerTimeReal checks that a real server's TIME is used.
func TestRedisServerTimeReal(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		s := newRedis(t, tg.Client, prefix)
		before := time.Now().Unix()
		visit(t, s, users, "k", fiveMins, 1, true)
		after := time.Now().Unix()
		score, err := tg.Client.ZScore(ctx, prefix+"p:{users}", "k").Result()
		if err != nil {
			t.Fatal(err)
		}
		// The server's clock is this machine's, give or take a second.
		if int64(score) < before-1 || int64(score) > after+1 {
			t.Fatalf("ZSCORE = %v, want between %d and %d", score, before-1, after+1)
		}
		wantActive(t, s, users, fiveMins, 1)
		visit(t, s, users, "k", fiveMins, 1, false)
	}, redistest.Real, redistest.Cluster)
}

// TestRedisScriptFlush checks that the store recovers when the server
// forgets its scripts (a restart or SCRIPT FLUSH): go-redis falls back
// from EVALSHA to EVAL. Only on miniredis: flushing a shared server's
// script cache would disturb other tests.
func TestRedisScriptFlush(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newRedis(t, tg.Client, redistest.Prefix(t)).WithClock(newClock(bbsNow).Now)
		visit(t, s, users, "a", fiveMins, 1, true)
		if err := tg.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		visit(t, s, users, "b", fiveMins, 2, true)
		tg.Client.ScriptFlush(ctx)
		wantActive(t, s, users, fiveMins, 2)
		tg.Client.ScriptFlush(ctx)
		leave(t, s, users, "a", 1, true)
	}, redistest.Mini)
}

// TestRedisForeignKey checks that a key of the wrong type is an error
// and is left alone.
func TestRedisForeignKey(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := redistest.Prefix(t)
		key := prefix + "p:{users}"
		if err := tg.Client.Set(ctx, key, "not a set", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		s := newRedis(t, tg.Client, prefix)
		if _, _, err := participant.Visit(ctx, s, users, "a", fiveMins); err == nil {
			t.Fatal("Visit on a string key succeeded")
		}
		if _, _, err := s.Leave(ctx, users, "a"); err == nil {
			t.Fatal("Leave on a string key succeeded")
		}
		if _, err := s.Active(ctx, users, fiveMins); err == nil {
			t.Fatal("Active on a string key succeeded")
		}
		if v, _ := tg.Client.Get(ctx, key).Result(); v != "not a set" {
			t.Fatalf("value changed to %q", v)
		}
	})
}

// TestRedisNil: a nil client is an error, as for every other store.
func TestRedisNil(t *testing.T) {
	if _, err := participant.NewRedis(nil, "p:"); err == nil {
		t.Fatal("NewRedis(nil) succeeded")
	}
}

// TestVisitRedisCostPerKey measures what a participant key of MaxKeyLen
// bytes takes in Redis (used_memory, on a server of the test's own), the
// figure DefaultMaxKeys is sized from: about 440 bytes.
func TestVisitRedisCostPerKey(t *testing.T) {
	rdb := redistest.OwnServer(t).Client
	ctx := context.Background()
	s := newRedis(t, rdb, redistest.Prefix(t))
	used := func() int64 { return redistest.InfoMemory(t, rdb, "used_memory") }
	const keys = 20_000
	before := used()
	batch := make([]string, 1000)
	for i := 0; i < keys; i += len(batch) {
		for j := range batch {
			batch[j] = fmt.Sprintf("%0*d", participant.MaxKeyLen, i+j)
		}
		if _, _, err := s.VisitMany(ctx, "cost", batch, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	per := (used() - before) / keys
	t.Logf("%d bytes of used_memory per key of %d bytes", per, participant.MaxKeyLen)
	if per < 350 || per > 520 {
		t.Errorf("%d bytes per key: DefaultMaxKeys's figure (about 440) is out of date", per)
	}
}
