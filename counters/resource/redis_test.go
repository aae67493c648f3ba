package resource_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/eventually"
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
		Prefix: prefix, Interval: interval, Lease: lease, Logger: zerolog.Nop(), AssumeNoHolders: true,
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
	eventually.True(t, within, "acquire "+name, func() bool {
		err := h.Acquire(bg(), []byte(name), n, maximum)
		if err != nil && !errors.Is(err, resource.ErrNotAvailable) {
			t.Fatalf("acquire %s: %v (refused before: %v)", name, err, refused)
		}
		at, refused = time.Now(), refused || err != nil
		return err == nil
	})
	return at, refused
}

// TestRedisRules: the protocol's rules for acquire, release, get and dump,
// as the memory table's tests and yrmcds's test/counter.cpp check them.
func TestRedisRules(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		r := openRedis(t, tg.Client, redistest.Prefix(t), 0)
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
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		// Renewal rounds were seen to stall 0.6–1 s on a machine at load
		// 8; a 1 s lease would then be given up (¾ lease) while Redis is fine.
		const lease = 2 * time.Second
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
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		const lease = 2 * time.Second // as above: room for a stalled renewal round
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
	r := openRedisInterval(t, tg.Client, redistest.Prefix(t), time.Hour, redisInterval)
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
	keys := redistest.Keys(t, tg.Client, "*r:{")
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

// TestRedisOneSlotPerName: both keys of a counter share a hash slot, and
// the birth key its acquire reads (see birth.lua) is in that slot too.
func TestRedisOneSlotPerName(t *testing.T) {
	tg := redistest.Open(t, redistest.Cluster)
	prefix := redistest.Prefix(t)
	r := openRedis(t, tg.Client, prefix, 0)
	h := r.NewHolder(nil)
	names := []string{"a", "{b}", "c}{", strings.Repeat("x", 1000)}
	for _, n := range names {
		wantErr(t, n, h.Acquire(bg(), []byte(n), 1, 1), nil)
	}
	slot := func(k string) int64 {
		s, err := tg.Client.ClusterKeySlot(bg(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var counters []string
	births := map[int64]bool{}
	for _, k := range redistest.Keys(t, tg.Client, prefix) {
		if strings.HasPrefix(k, prefix+"r:b{") {
			births[slot(k)] = true
		} else {
			counters = append(counters, k)
		}
	}
	if len(counters) != 2*len(names) {
		t.Fatalf("keys %v", counters)
	}
	slots := map[string]int64{}
	for _, k := range counters {
		slots[strings.TrimSuffix(k, ":l")] = slot(k)
	}
	for _, k := range counters {
		s := slot(k)
		if s != slots[strings.TrimSuffix(k, ":l")] {
			t.Fatalf("%s in slot %d, its counter in %d", k, s, slots[strings.TrimSuffix(k, ":l")])
		}
		if !births[s] {
			t.Fatalf("no birth key in slot %d of %s: births in %v", s, k, births)
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

// TestRedisStallLeavesNoHolding: an acquire that timed out unanswered
// during a stall and ran late, maybe after the failed holder's drops, is
// dropped too: once its holder ended, no holding of it is left in Redis
// within two leases, though no script touches its counter again.
func TestRedisStallLeavesNoHolding(t *testing.T) {
	t.Parallel() // waits for leases
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		const lease = time.Second
		prefix := redistest.Prefix(t)
		proxy := redistest.NewProxy(t, tg.Addr)
		stalled := openRedis(t, tg.NoRetryClient(t, proxy.Addr()), prefix, lease)
		h := stalled.NewHolder(nil)
		wantErr(t, "acquire s", h.Acquire(bg(), []byte("s"), 1, 1), nil)
		proxy.Stall()
		for _, name := range []string{"t", "u"} { // a single acquire, and one of a pipeline
			ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
			ops := []resource.Op{{Kind: resource.OpAcquire, Name: []byte(name), Resources: 1, Maximum: 1}}
			if name == "u" {
				ops = append(ops, resource.Op{Kind: resource.OpGet, Name: []byte("s")})
			}
			err := h.Do(ctx, ops)[0].Err
			cancel()
			if !errors.Is(err, resource.ErrStore) {
				t.Fatalf("acquire %s during the stall: %v, want ErrStore", name, err)
			}
		}
		proxy.Resume() // the acquires of t and u run now, before or after the drops
		h.ReleaseAll(bg())
		ended := time.Now()
		eventually.NoError(t, 2*lease, "no holding left", func() error { return counterstest.HoldingLeft(bg(), tg.Client, prefix) })
		t.Logf("no holding left %v after the holder ended", time.Since(ended).Round(10*time.Millisecond))
	}, redistest.Mini, redistest.Real)
}

// TestRedisReleasesInFlightKeepLeases: a connection that always has a
// release on its way to Redis — Release 0 touches, or partial releases,
// back to back, single or pipelined — keeps its holdings over many leases:
// a renewal that finds the holding in Redis extends its lease even while
// a release of it is in flight.
func TestRedisReleasesInFlightKeepLeases(t *testing.T) {
	t.Parallel()
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		// Without the renewals, the holders are given up after 3/4 of a
		// lease. Renewals tolerate a stall of about half a lease, and the
		// shared test servers on a loaded machine were seen to stall for
		// a second.
		const lease = 3 * time.Second
		prefix := redistest.Prefix(t)
		r := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
		other := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease).NewHolder(nil)
		var lostA, lostB, lostC atomic.Bool
		a := r.NewHolder(func() { lostA.Store(true) }) // Release 0, one at a time
		b := r.NewHolder(func() { lostB.Store(true) }) // Release 1, one at a time
		c := r.NewHolder(func() { lostC.Store(true) }) // Release 0, 1, 0 pipelined
		const many = 1 << 30
		wantErr(t, "a acquires", a.Acquire(bg(), []byte("touched"), 1, 1), nil)
		wantErr(t, "b acquires", b.Acquire(bg(), []byte("partial"), many, many), nil)
		wantErr(t, "c acquires", c.Acquire(bg(), []byte("piped"), many, many), nil)
		end := time.Now().Add(2 * lease)
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		var counts [3]int
		loop := func(i int, lost *atomic.Bool, step func() error) {
			defer wg.Done()
			for time.Now().Before(end) && !lost.Load() {
				if err := step(); err != nil {
					errs <- fmt.Errorf("holder %d, after %d steps: %w", i, counts[i], err)
					return
				}
				counts[i]++
			}
		}
		wg.Add(3)
		go loop(0, &lostA, func() error { return a.Release(bg(), []byte("touched"), 0) })
		go loop(1, &lostB, func() error { return b.Release(bg(), []byte("partial"), 1) })
		go loop(2, &lostC, func() error {
			for _, res := range c.Do(bg(), []resource.Op{
				{Kind: resource.OpRelease, Name: []byte("piped"), Resources: 0},
				{Kind: resource.OpRelease, Name: []byte("piped"), Resources: 1},
				{Kind: resource.OpRelease, Name: []byte("piped"), Resources: 0},
			}) {
				if res.Err != nil {
					return res.Err
				}
			}
			return nil
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("steps: %v", counts)
		if lostA.Load() || lostB.Load() || lostC.Load() {
			t.Fatalf("holders with releases in flight were told they lost their holdings: a %v, b %v, c %v",
				lostA.Load(), lostB.Load(), lostC.Load())
		}
		wantErr(t, "other acquires the touched unit", other.Acquire(bg(), []byte("touched"), 1, 1), resource.ErrNotAvailable)
		for _, e := range []struct {
			h    *resource.RedisHolder
			name string
			want uint32
		}{{a, "touched", 1}, {b, "partial", many - uint32(counts[1])}, {c, "piped", many - uint32(counts[2])}} {
			if got := e.h.Held(e.name); got != e.want {
				t.Fatalf("%s: held %d, want %d", e.name, got, e.want)
			}
			if got := redisGet(t, r, e.name); got != e.want {
				t.Fatalf("%s: consumption %d in Redis, want %d", e.name, got, e.want)
			}
			wantErr(t, e.name+": release the rest", e.h.Release(bg(), []byte(e.name), e.want), nil)
		}
	})
}

// TestRedisHoldingGone: when Redis no longer has a holding this instance
// believes a holder has — its lease ended and another instance's script
// dropped it first, or the counter's keys vanished — the holder's next
// acquire or release (single or pipelined) answers ErrStore and fails the
// holder, whose connection is then closed. A Get does not depend on the
// holder: it works, pipelined or not, on a failed holder too.
func TestRedisHoldingGone(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	// Redis's clock, mid-interval: the keys do not expire at a boundary.
	start := time.Unix(1_000_000_000/86400*86400+3600, 0)
	tg.Mini.SetTime(start)
	const lease = time.Minute // no renewal or check runs during the test
	prefix := redistest.Prefix(t)
	r := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease)
	other := openRedis(t, tg.NoRetryClient(t, ""), prefix, lease).NewHolder(nil)
	const n = 5
	var lost [n]atomic.Bool
	var hs [n]*resource.RedisHolder
	names := [n][]byte{}
	for i := range hs {
		hs[i] = r.NewHolder(func() { lost[i].Store(true) })
		names[i] = []byte(fmt.Sprintf("gone%d", i))
		wantErr(t, "acquire", hs[i].Acquire(bg(), names[i], 2, 10), nil)
	}
	// Redis's clock jumps past the leases, and another instance's acquires
	// drop the expired holdings before the holders' own scripts could
	// (which would answer -3 or -1 themselves).
	tg.Mini.SetTime(start.Add(2 * lease))
	for i := range hs {
		wantErr(t, "other acquires", other.Acquire(bg(), names[i], 1, 10), nil)
	}
	// The counter of holder 4 vanishes altogether.
	sum := sha256.Sum256(names[4])
	key := prefix + "r:{" + hex.EncodeToString(sum[:16]) + "}"
	if n, err := tg.Client.Del(bg(), key, key+":l").Result(); err != nil || n != 2 {
		t.Fatalf("delete %s: %d, %v", key, n, err)
	}

	checkLost := func(i int, what string, err error) {
		t.Helper()
		if !errors.Is(err, resource.ErrStore) || !lost[i].Load() {
			t.Fatalf("%s: %v, holder failed %v; want ErrStore and failed", what, err, lost[i].Load())
		}
	}
	checkLost(0, "release 1 of a gone holding", hs[0].Release(bg(), names[0], 1))
	res := hs[1].Do(bg(), []resource.Op{
		{Kind: resource.OpGet, Name: names[1]},
		{Kind: resource.OpRelease, Name: names[1], Resources: 2},
		{Kind: resource.OpGet, Name: names[1]},
	})
	if res[0].Err != nil || res[0].Value != 1 || res[2].Err != nil || res[2].Value != 1 {
		t.Fatalf("pipelined gets around the release: %+v", res)
	}
	checkLost(1, "pipelined release of a gone holding", res[1].Err)
	checkLost(2, "acquire more of a gone holding", hs[2].Acquire(bg(), names[2], 1, 10))
	checkLost(3, "touch (release 0) of a gone holding", hs[3].Release(bg(), names[3], 0))
	checkLost(4, "release of a vanished counter", hs[4].Release(bg(), names[4], 1))

	// Gets on failed holders, pipelined or single, answer as Redis.Get
	// (the acquire of holder 2 ran in Redis: 2 until the holder ends).
	for i, h := range hs[:4] {
		want := uint32(1)
		if i == 2 {
			want = 2
		}
		for _, ops := range [][]resource.Op{
			{{Kind: resource.OpGet, Name: names[i]}},
			{{Kind: resource.OpGet, Name: names[i]}, {Kind: resource.OpGet, Name: names[i]}},
		} {
			for _, res := range h.Do(bg(), ops) {
				if res.Err != nil || res.Value != want {
					t.Fatalf("holder %d: get on a failed holder: %+v, want %d", i, res, want)
				}
			}
		}
		wantErr(t, "release on a failed holder", h.Release(bg(), names[i], 1), resource.ErrStore)
	}
	if res := hs[4].Do(bg(), []resource.Op{{Kind: resource.OpGet, Name: names[4]}})[0]; !errors.Is(res.Err, resource.ErrNotFound) {
		t.Fatalf("get of the vanished counter on a failed holder: %+v", res)
	}
	// Ending the failed holders leaves only the other instance's holdings
	// (what the acquire of holder 2 added is dropped too).
	for _, h := range hs {
		h.ReleaseAll(bg())
	}
	for i := range 4 {
		if got := redisGet(t, r, string(names[i])); got != 1 {
			t.Fatalf("%s after the failed holders ended: %d, want 1 (the other's)", names[i], got)
		}
	}
}

// dupScans is a go-redis hook that makes every SCAN reply repeat its keys
// and those of every reply before it, as SCAN may while the database is
// rehashed (or a slot moves); it counts the SCANs.
type dupScans struct {
	mu    sync.Mutex
	seen  []string
	scans int
}

func (d *dupScans) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *dupScans) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*redis.ScanCmd); ok && err == nil {
			d.mu.Lock()
			keys, cursor := sc.Val()
			d.seen = append(d.seen, keys...)
			page := append(append([]string(nil), keys...), d.seen...)
			d.scans++
			d.mu.Unlock()
			sc.SetVal(page, cursor)
		}
		return err
	}
}

func (d *dupScans) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedisDumpOnce: Dump lists each counter once and Stats counts it
// once, however often SCAN returns its key.
func TestRedisDumpOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		rdb := tg.NoRetryClient(t, "")
		d := &dupScans{}
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			cc.OnNewNode(func(c *redis.Client) { c.AddHook(d) })
		} else {
			rdb.AddHook(d)
		}
		r := openRedis(t, rdb, redistest.Prefix(t), 0)
		h := r.NewHolder(nil)
		names := []string{"one", "two", "three", "four"}
		for _, n := range names {
			wantErr(t, "acquire "+n, h.Acquire(bg(), []byte(n), 1, 1), nil)
		}
		listed := map[string]int{}
		if err := r.Dump(bg(), func(e resource.Entry) error { listed[e.Name]++; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if listed[n] != 1 {
				t.Fatalf("Dump listed %s %d times: %v", n, listed[n], listed)
			}
		}
		if len(listed) != len(names) {
			t.Fatalf("Dump listed %v", listed)
		}
		if s, err := r.Stats(bg()); err != nil || s.Objects != int64(len(names)) {
			t.Fatalf("Stats = %+v, %v; want %d objects", s, err, len(names))
		}
		if d.scans == 0 {
			t.Fatal("the hook saw no SCAN")
		}
		h.ReleaseAll(bg())
	})
}

// TestRedisScanRoundTrips: Dump's SCAN walks the whole database, but
// many keys per round trip.
func TestRedisScanRoundTrips(t *testing.T) {
	tg := redistest.Open(t, redistest.Real)
	prefix := redistest.Prefix(t)
	// Keys of someone else (another prefix), gone in a minute.
	const others = 5000
	if _, err := tg.Client.Pipelined(bg(), func(p redis.Pipeliner) error {
		for i := range others {
			p.Set(bg(), fmt.Sprintf("%sother:%d", prefix, i), "x", time.Minute)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rdb := tg.NoRetryClient(t, "")
	d := &dupScans{}
	rdb.AddHook(d)
	r := openRedis(t, rdb, prefix+"store:", 0)
	keys, err := tg.Client.DBSize(bg()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stats(bg()); err != nil {
		t.Fatal(err)
	}
	// SCAN with COUNT n visits about n buckets of the key table, which
	// has up to a few times as many buckets as keys: with COUNT 100 this
	// would take at least keys/100 round trips.
	if limit := int(keys)/250 + 5; d.scans > limit {
		t.Fatalf("Stats over %d keys took %d SCAN round trips, want at most %d", keys, d.scans, limit)
	}
	t.Logf("%d keys, %d SCAN round trips", keys, d.scans)
}

// TestRedisOddPrefix: a prefix with glob characters and bytes that are not
// UTF-8 lists its own counters, and only those.
func TestRedisOddPrefix(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		base := redistest.Prefix(t)
		a := openRedis(t, tg.NoRetryClient(t, ""), base+"\xff[a]*?\\:", 0)
		b := openRedis(t, tg.NoRetryClient(t, ""), base+"\xffa*?\\:", 0)   // matched by a's prefix as a glob
		c := openRedis(t, tg.NoRetryClient(t, ""), base+"\xffab?\\\\:", 0) // and this one too, unescaped
		d := openRedis(t, tg.NoRetryClient(t, ""), base+"\xfe[a]*?\\:", 0) // a's but for a byte that is not UTF-8
		for _, s := range []struct {
			r    *resource.Redis
			name string
		}{{a, "in-a"}, {b, "in-b"}, {c, "in-c"}, {d, "in-d"}} {
			h := s.r.NewHolder(nil)
			wantErr(t, "acquire "+s.name, h.Acquire(bg(), []byte(s.name), 1, 1), nil)
			t.Cleanup(func() { h.ReleaseAll(bg()) })
		}
		for _, s := range []struct {
			r    *resource.Redis
			name string
		}{{a, "in-a"}, {b, "in-b"}, {c, "in-c"}, {d, "in-d"}} {
			d := redisDump(t, s.r)
			if _, ok := d[s.name]; !ok || len(d) != 1 {
				t.Fatalf("dump of the store of %s: %v", s.name, d)
			}
		}
	})
}

// TestRedisBadNameInRedis: a counter whose hash holds a name that no
// acquire could have written (too long, or empty) is left out of Dump and
// Stats, without failing them; its Get fails.
func TestRedisBadNameInRedis(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		r := openRedis(t, tg.Client, prefix, 0)
		h := r.NewHolder(nil)
		for _, n := range []string{"long", "empty", "fine"} {
			wantErr(t, "acquire "+n, h.Acquire(bg(), []byte(n), 1, 1), nil)
		}
		for n, v := range map[string]string{"long": strings.Repeat("n", resource.MaxNameLen+1), "empty": ""} {
			sum := sha256.Sum256([]byte(n))
			key := prefix + "r:{" + hex.EncodeToString(sum[:16]) + "}"
			if err := tg.Client.HSet(bg(), key, "n", v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if d := redisDump(t, r); len(d) != 1 || d["fine"].Consumption != 1 {
			var lens []int
			for n := range d {
				lens = append(lens, len(n))
			}
			t.Fatalf("dump lists names of %v bytes, want only fine", lens)
		}
		if s, err := r.Stats(bg()); err != nil || s.Objects != 1 {
			t.Fatalf("Stats = %+v, %v", s, err)
		}
		if _, err := r.Get(bg(), []byte("long")); !errors.Is(err, resource.ErrStore) {
			t.Fatalf("Get of a counter with a bad name: %v, want ErrStore", err)
		}
		h.ReleaseAll(bg())
	})
}

// TestRedisCloseAtOnce: Close may be called many times, at once.
func TestRedisCloseAtOnce(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	r := openRedis(t, tg.Client, redistest.Prefix(t), 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Close()
		}()
	}
	wg.Wait()
}
