package resource_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// redisInterval is the statistics interval of TestRedisIntervals, which
// sets miniredis's clock. The other tests keep the default of a day, so
// that no boundary passes in the middle of one (but at midnight UTC).
const redisInterval = 10 * time.Second

// openRedis returns a store on rdb under prefix with the default interval,
// closed at the end of the test.
func openRedis(t testing.TB, rdb redis.UniversalClient, prefix string, lease time.Duration) *resource.Redis {
	t.Helper()
	return openRedisInterval(t, rdb, prefix, lease, 0)
}

// openRedisInterval is openRedis with a statistics interval.
func openRedisInterval(t testing.TB, rdb redis.UniversalClient, prefix string, lease, interval time.Duration) *resource.Redis {
	t.Helper()
	r, err := resource.NewRedis(context.Background(), rdb, resource.RedisOptions{
		Prefix: prefix, Interval: interval, Lease: lease, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func bg() context.Context { return context.Background() }

func redisGet(t testing.TB, r *resource.Redis, name string) uint32 {
	t.Helper()
	v, err := r.Get(bg(), []byte(name))
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return v
}

func redisDump(t testing.TB, r *resource.Redis) map[string]resource.Entry {
	t.Helper()
	m := map[string]resource.Entry{}
	if err := r.Dump(bg(), func(e resource.Entry) error { m[e.Name] = e; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// acquireWhenFree retries the acquire while it answers ErrNotAvailable,
// for at most within, and returns when it succeeded and whether it was
// refused first.
func acquireWhenFree(t testing.TB, h *resource.RedisHolder, name string, n, maximum uint32, within time.Duration) (at time.Time, refused bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := h.Acquire(bg(), []byte(name), n, maximum)
		if err == nil {
			return time.Now(), refused
		}
		if !errors.Is(err, resource.ErrNotAvailable) || time.Now().After(deadline) {
			t.Fatalf("acquire %s: %v (refused before: %v)", name, err, refused)
		}
		refused = true
		time.Sleep(10 * time.Millisecond) // polling, not ordering
	}
}

// TestRedisRules: the protocol's rules for acquire, release, get and dump,
// as the memory table's tests and yrmcds's test/counter.cpp check them.
func TestRedisRules(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		r := openRedis(t, tg.NoRetryClient(t, ""), redistest.Prefix(t), 0)
		a, b := r.NewHolder(nil), r.NewHolder(nil)
		cx := bg()
		// one_client: up to and including the maximum.
		wantErr(t, "acquire 2 of 10", a.Acquire(cx, []byte("hoge"), 2, 10), nil)
		wantErr(t, "acquire 3 of 10", a.Acquire(cx, []byte("hoge"), 3, 10), nil)
		wantErr(t, "acquire 5 of 10", a.Acquire(cx, []byte("hoge"), 5, 10), nil)
		if got := redisGet(t, r, "hoge"); got != 10 {
			t.Fatalf("consumption %d, want 10", got)
		}
		wantErr(t, "acquire past the maximum", a.Acquire(cx, []byte("hoge"), 1, 10), resource.ErrNotAvailable)
		wantErr(t, "a larger maximum admits more", a.Acquire(cx, []byte("hoge"), 1, 11), nil)
		wantErr(t, "release 4", a.Release(cx, []byte("hoge"), 4), nil)
		if got := redisGet(t, r, "hoge"); got != 7 {
			t.Fatalf("release must decrease the consumption: %d, want 7", got)
		}
		// Release is per holder.
		wantErr(t, "release of a missing counter", a.Release(cx, []byte("none"), 0), resource.ErrNotFound)
		wantErr(t, "b releases what only a holds", b.Release(cx, []byte("hoge"), 1), resource.ErrNotAcquired)
		wantErr(t, "b releases 0 holding nothing", b.Release(cx, []byte("hoge"), 0), resource.ErrNotAcquired)
		wantErr(t, "b acquires 1", b.Acquire(cx, []byte("hoge"), 1, 10), nil)
		wantErr(t, "b over-releases", b.Release(cx, []byte("hoge"), 2), resource.ErrNotAcquired)
		wantErr(t, "a releases 0 while holding", a.Release(cx, []byte("hoge"), 0), nil)
		if got := redisGet(t, r, "hoge"); got != 8 {
			t.Fatalf("refused releases changed the consumption: %d, want 8", got)
		}
		// No wrap past 2^32-1.
		wantErr(t, "acquire 2^32-1", a.Acquire(cx, []byte("big"), 0xFFFFFFFF, 0xFFFFFFFF), nil)
		wantErr(t, "one more", a.Acquire(cx, []byte("big"), 1, 0xFFFFFFFF), resource.ErrNotAvailable)
		if got := redisGet(t, r, "big"); got != 0xFFFFFFFF {
			t.Fatalf("big = %d", got)
		}
		// Invalid arguments change nothing.
		for what, err := range map[string]error{
			"acquire 0":          a.Acquire(cx, []byte("x"), 0, 10),
			"maximum < res":      a.Acquire(cx, []byte("x"), 2, 1),
			"empty name":         a.Acquire(cx, nil, 1, 1),
			"release empty name": a.Release(cx, nil, 1),
		} {
			wantErr(t, what, err, resource.ErrInvalid)
		}
		if _, err := r.Get(cx, []byte("x")); !errors.Is(err, resource.ErrNotFound) {
			t.Fatalf("an invalid acquire created the counter: %v", err)
		}
		if _, err := r.Get(cx, nil); !errors.Is(err, resource.ErrInvalid) {
			t.Fatalf("Get of an empty name: %v, want ErrInvalid", err)
		}
		// dump: current and maximum consumption; a released counter is
		// still listed at 0 until the next boundary.
		wantErr(t, "dump:aaa 5", a.Acquire(cx, []byte("dump:aaa"), 5, 10), nil)
		wantErr(t, "dump:aaa 3", a.Acquire(cx, []byte("dump:aaa"), 3, 10), nil)
		wantErr(t, "dump:aaa -1", a.Release(cx, []byte("dump:aaa"), 1), nil)
		wantErr(t, "dump:bbb 100", a.Acquire(cx, []byte("dump:bbb"), 100, 100), nil)
		wantErr(t, "dump:bbb -100", a.Release(cx, []byte("dump:bbb"), 100), nil)
		d := redisDump(t, r)
		if e := d["dump:aaa"]; e.Consumption != 7 || e.MaxConsumption != 8 {
			t.Fatalf("dump:aaa %+v, want 7 8", e)
		}
		if e, ok := d["dump:bbb"]; !ok || e.Consumption != 0 || e.MaxConsumption != 100 {
			t.Fatalf("dump:bbb %+v (listed %v), want 0 100", e, ok)
		}
		if len(d) != 4 {
			t.Fatalf("dump lists %d counters: %v", len(d), d)
		}
		s, err := r.Stats(cx)
		if err != nil || s.Objects != 4 || s.TotalObjects != 4 {
			t.Fatalf("Stats = %+v, %v", s, err)
		}
		// A holder's end releases everything it held (multi_clients).
		b.ReleaseAll(cx)
		a.ReleaseAll(cx)
		for _, n := range []string{"hoge", "big", "dump:aaa"} {
			if got := redisGet(t, r, n); got != 0 {
				t.Fatalf("%s after ReleaseAll = %d", n, got)
			}
		}
	})
}

// TestRedisSharedMaximum: two instances on one Redis enforce one maximum.
func TestRedisSharedMaximum(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		ra := openRedis(t, tg.NoRetryClient(t, ""), prefix, 0)
		rb := openRedis(t, tg.NoRetryClient(t, ""), prefix, 0)
		a, b := ra.NewHolder(nil), rb.NewHolder(nil)
		cx := bg()
		name := []byte("db-slots")
		wantErr(t, "a holds 3 of 4", a.Acquire(cx, name, 3, 4), nil)
		wantErr(t, "b asks for 2 of 4", b.Acquire(cx, name, 2, 4), resource.ErrNotAvailable)
		if got := redisGet(t, rb, "db-slots"); got != 3 {
			t.Fatalf("get on b = %d, want 3", got)
		}
		a.ReleaseAll(cx)
		wantErr(t, "b gets 4 at once", b.Acquire(cx, name, 4, 4), nil)
	})
}

// TestRedisLeaseExpiry: the holdings of an instance that stops (kill -9:
// no release, no renewal) are still held just after, and acquirable once
// its lease ends.
func TestRedisLeaseExpiry(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const lease = 500 * time.Millisecond
		prefix := redistest.Prefix(t)
		dead := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
		live := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
		h := dead.NewHolder(nil)
		name := []byte("jobs")
		wantErr(t, "the dying instance holds 2 of 2", h.Acquire(bg(), name, 2, 2), nil)
		dead.Close() // no more renewals, and no release
		died := time.Now()
		other := live.NewHolder(nil)
		wantErr(t, "just after", other.Acquire(bg(), name, 1, 2), resource.ErrNotAvailable)
		freeAt, _ := acquireWhenFree(t, other, "jobs", 2, 2, 10*lease)
		if waited := freeAt.Sub(died); waited < lease*3/4 {
			t.Fatalf("the holdings were free after %v, before the lease of %v", waited, lease)
		}
		if e := redisDump(t, live)["jobs"]; e.Consumption != 2 || e.MaxConsumption != 2 {
			t.Fatalf("after expiry and re-acquire: %+v", e)
		}
	})
}

// TestRedisRenewalKeepsHoldings: a live instance keeps its holdings over
// many leases.
func TestRedisRenewalKeepsHoldings(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const lease = time.Second
		prefix := redistest.Prefix(t)
		r := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
		other := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease).NewHolder(nil)
		var lost atomic.Bool
		h := r.NewHolder(func() { lost.Store(true) })
		wantErr(t, "acquire", h.Acquire(bg(), []byte("kept"), 1, 1), nil)
		end := time.Now().Add(3 * lease)
		for time.Now().Before(end) {
			wantErr(t, "other acquires while held", other.Acquire(bg(), []byte("kept"), 1, 1), resource.ErrNotAvailable)
			time.Sleep(lease / 5)
		}
		if lost.Load() {
			t.Fatal("a renewed holder was told it lost its holdings")
		}
		wantErr(t, "release after many leases", h.Release(bg(), []byte("kept"), 1), nil)
	})
}

// TestRedisLostLease: an instance that loses Redis for longer than its
// lease gives its holders up before the lease ends in Redis, so no two
// holders ever hold the same unit.
func TestRedisLostLease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const lease = time.Second
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		cut := openRedis(t, tg.NoRetryClient(t, proxy.Addr()), prefix, lease)
		live := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
		lostAt := make(chan time.Time, 1)
		h := cut.NewHolder(func() { lostAt <- time.Now() })
		name := []byte("lock")
		acquired := time.Now()
		wantErr(t, "acquire", h.Acquire(bg(), name, 1, 1), nil)
		proxy.Cut()
		gotAt, _ := acquireWhenFree(t, live.NewHolder(nil), "lock", 1, 1, 10*lease)
		var lost time.Time
		select {
		case lost = <-lostAt:
		default:
			t.Fatal("the cut-off holder was never told it lost its holdings")
		}
		if !lost.Before(gotAt) || lost.After(acquired.Add(lease)) {
			t.Fatalf("holder given up %v after acquiring, the other got it %v after: want given up first, within the lease",
				lost.Sub(acquired), gotAt.Sub(acquired))
		}
		if err := h.Acquire(bg(), []byte("more"), 1, 1); err == nil {
			t.Fatal("a holder that lost its holdings acquired more")
		}
		proxy.Restore()
	}, redistest.Mini, redistest.Real)
}

// TestRedisIntervals: maximum consumption per epoch-aligned interval and
// GC by expiry at the boundary, with miniredis's clock.
func TestRedisIntervals(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	sec := int64(1_000_000_000/10*10 + 5)
	set := func(s int64) { sec = s; tg.Mini.SetTime(time.Unix(s, 0)) }
	set(sec)
	r := openRedisInterval(t, tg.NoRetryClient(t, ""), redistest.Prefix(t), time.Hour, redisInterval)
	h := r.NewHolder(nil)
	name := []byte("m")
	maxOf := func() uint32 {
		t.Helper()
		e, ok := redisDump(t, r)["m"]
		if !ok {
			t.Fatal("counter m not listed")
		}
		return e.MaxConsumption
	}
	const I = int64(redisInterval / time.Second)
	base := sec - 5
	wantErr(t, "acquire 5", h.Acquire(bg(), name, 5, 100), nil)
	wantErr(t, "release 4", h.Release(bg(), name, 4), nil)
	if got := maxOf(); got != 5 {
		t.Fatalf("max in the first interval = %d, want 5", got)
	}
	set(base + I)
	if got := maxOf(); got != 1 {
		t.Fatalf("max of an untouched counter after the boundary = %d, want 1", got)
	}
	wantErr(t, "acquire 2", h.Acquire(bg(), name, 2, 100), nil)
	wantErr(t, "release 2", h.Release(bg(), name, 2), nil)
	if got := maxOf(); got != 3 {
		t.Fatalf("max after acquire in the new interval = %d, want 3", got)
	}
	set(base + 2*I + 9)
	wantErr(t, "acquire 9", h.Acquire(bg(), name, 9, 100), nil)
	set(base + 3*I)
	wantErr(t, "release 10", h.Release(bg(), name, 10), nil)
	if got := maxOf(); got != 10 {
		t.Fatalf("max after the first release in an interval = %d, want 10", got)
	}
	// Released to 0: listed until the next boundary, then gone by expiry.
	keys := redistest.Keys(t, tg.Client, "")
	ttl := tg.Mini.TTL(keys[0])
	if ttl <= 0 || ttl > redisInterval {
		t.Fatalf("TTL of a counter at 0 = %v, want up to the next boundary", ttl)
	}
	tg.Mini.FastForward(ttl)
	set(base + 4*I)
	if d := redisDump(t, r); len(d) != 0 {
		t.Fatalf("after the boundary: %v", d)
	}
	if _, err := r.Get(bg(), name); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("Get after GC: %v", err)
	}
}

// TestRedisOneSlotPerName: both keys of a counter share a hash slot.
func TestRedisOneSlotPerName(t *testing.T) {
	tg := redistest.Open(t, redistest.Cluster)
	prefix := redistest.Prefix(t)
	r := openRedis(t, tg.NoRetryClient(t, ""), prefix, 0)
	h := r.NewHolder(nil)
	for _, n := range []string{"a", "{b}", "c}{", strings.Repeat("x", 1000)} {
		wantErr(t, n, h.Acquire(bg(), []byte(n), 1, 1), nil)
	}
	keys := redistest.Keys(t, tg.Client, prefix)
	if len(keys) != 8 {
		t.Fatalf("keys %v", keys)
	}
	slots := map[string]int64{}
	for _, k := range keys {
		slot, err := tg.Client.ClusterKeySlot(bg(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[strings.TrimSuffix(k, ":l")] = slot
	}
	for _, k := range keys {
		if s, _ := tg.Client.ClusterKeySlot(bg(), k).Result(); s != slots[strings.TrimSuffix(k, ":l")] {
			t.Fatalf("%s in slot %d, its counter in %d", k, s, slots[strings.TrimSuffix(k, ":l")])
		}
	}
	h.ReleaseAll(bg())
}

func TestNewRedisRefusesRetryingClients(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	c := redis.NewClient(&redis.Options{Addr: tg.Addr})
	defer c.Close()
	if _, err := resource.NewRedis(bg(), c, resource.RedisOptions{}); err == nil || !strings.Contains(err.Error(), "retries") {
		t.Fatalf("a client with retries: %v", err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tg.Addr}, MaxRetries: -1})
	defer cc.Close()
	if _, err := resource.NewRedis(bg(), cc, resource.RedisOptions{}); err == nil || !strings.Contains(err.Error(), "MaxRedirects") {
		t.Fatalf("a cluster client following redirects: %v", err)
	}
	nr := tg.NoRetryClient(t, "")
	for _, o := range []resource.RedisOptions{{Lease: time.Millisecond}, {Interval: time.Second}} {
		if _, err := resource.NewRedis(bg(), nr, o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}

// TestRedisStall: Redis stalls, so an acquire times out unanswered and
// runs late, once Redis resumes. The holder is failed at the timeout (its
// connection would close); the late holding, which no one renews, blocks
// others only until its lease ends; and what the holder knew it held is
// released at once.
func TestRedisStall(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const lease = time.Second
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		stalled := openRedis(t, tg.NoRetryClient(t, proxy.Addr()), prefix, lease)
		other := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease).NewHolder(nil)
		var lost atomic.Bool
		h := stalled.NewHolder(func() { lost.Store(true) })
		wantErr(t, "acquire s", h.Acquire(bg(), []byte("s"), 1, 1), nil)
		proxy.Stall()
		ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
		err := h.Acquire(ctx, []byte("t"), 1, 1)
		cancel()
		if !errors.Is(err, resource.ErrStore) || !lost.Load() {
			t.Fatalf("acquire during the stall: %v, holder failed %v; want ErrStore and failed", err, lost.Load())
		}
		proxy.Resume() // the acquire of t runs now
		h.ReleaseAll(bg())
		wantErr(t, "s is free once the failed holder ended", other.Acquire(bg(), []byte("s"), 1, 1), nil)
		_, sawHeld := acquireWhenFree(t, other, "t", 1, 1, 5*lease)
		t.Logf("the late acquire's holding was seen: %v", sawHeld)
	}, redistest.Mini, redistest.Real)
}
