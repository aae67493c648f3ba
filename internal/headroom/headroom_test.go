package headroom_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

var errKind = errors.New("kind: out of memory for new counter names")

func TestParse(t *testing.T) {
	r, err := headroom.Parse("# Memory\r\nused_memory:900\r\nused_memory_human:900B\r\nmaxmemory:1000\r\nmaxmemory_human:1000B\r\n", 20)
	if err != nil || r.Used != 900 || r.Max != 1000 || r.Limit != 800 || !r.Full() {
		t.Fatalf("parse: %+v, %v", r, err)
	}
	r, err = headroom.Parse("used_memory:900\r\nmaxmemory:0\r\n", 20)
	if err != nil || r.Limit != 0 || r.Full() {
		t.Fatalf("without maxmemory: %+v, %v; want no limit", r, err)
	}
	for _, bad := range []string{"", "used_memory:1\r\n", "used_memory:x\r\nmaxmemory:1\r\n", "used_memory:-1\r\nmaxmemory:1\r\n"} {
		if _, err := headroom.Parse(bad, 20); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestNilGuardRefusesNothing(t *testing.T) {
	var g *headroom.Guard
	if g.Full() || g.Refusals() != 0 || g.Last() != nil || !errors.Is(g.Refused(errKind), errKind) {
		t.Fatal("a nil guard must refuse nothing")
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, p := range []int{0, -1, 100} {
		if _, err := headroom.New(rdb, headroom.Options{Percent: p}); err == nil {
			t.Errorf("percent %d: no error", p)
		}
	}
	if _, err := headroom.New(nil, headroom.Options{Percent: 20}); err == nil {
		t.Error("nil client: no error")
	}
}

// counting counts the commands a client sends.
type counting struct{ n atomic.Int64 }

func (c *counting) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGuardReadsOncePerPeriodAndOnlyWhenAsked checks that an idle guard
// sends nothing and a busy one reads INFO once per period, and that it
// turns full past the limit and back below it.
func TestGuardReadsOncePerPeriodAndOnlyWhenAsked(t *testing.T) {
	addr := redistest.StartServer(t, "--maxmemory", "16mb", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	var infos counting
	rdb.AddHook(&infos)
	g, err := headroom.New(rdb, headroom.Options{Percent: 20, Setting: "COUNTERS_REDIS_HEADROOM"})
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).UnixNano())
	g.SetClock(func() time.Time { return time.Unix(0, now.Load()) })
	// A reading starts only in a call (Full), which marks it under way
	// (Busy) before it returns: with no call there is nothing to wait for,
	// and once the calls returned and no reading is under way, every INFO
	// they caused has been sent.
	if n := infos.n.Load(); n != 0 {
		t.Fatalf("an idle guard sent %d INFO", n)
	}
	waitRead := func(want int64) {
		t.Helper()
		eventually.True(t, 10*time.Second, "the reading ended", func() bool { return !g.Busy() })
		if n := infos.n.Load(); n != want {
			t.Fatalf("INFO sent %d times, want %d", n, want)
		}
	}
	for range 1000 {
		if g.Full() {
			t.Fatal("full on an empty Redis")
		}
	}
	waitRead(1)
	if r := g.Last(); r.Max != 16<<20 || r.Limit != 16<<20/100*80 || r.Used <= 0 || r.Full() {
		t.Fatalf("reading %+v", r)
	}
	// Past the limit: 14 values of 900 KB (Redis's own use is about 1 MiB).
	ctx, prefix := context.Background(), redistest.Prefix(t)
	for i := range 14 {
		if err := rdb.Set(ctx, prefix+strings.Repeat("k", i+1), strings.Repeat("v", 900_000), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	g.Full() // within the period: no reading
	waitRead(1)
	now.Add(int64(time.Second))
	g.Full()
	waitRead(2)
	if !g.Full() {
		t.Fatalf("not full at %+v", g.Last())
	}
	err = g.Refused(errKind)
	if !errors.Is(err, errKind) || !strings.Contains(err.Error(), "COUNTERS_REDIS_HEADROOM") || !strings.Contains(err.Error(), "maxmemory 16.0 MiB") || g.Refusals() != 1 {
		t.Fatalf("refusal %v, %d refusals", err, g.Refusals())
	}
	rdb.Del(ctx, redistest.Keys(t, rdb, prefix)...)
	// Past half the limit the period is a tenth.
	now.Add(int64(time.Second / 10))
	g.Full()
	waitRead(3)
	if g.Full() {
		t.Fatalf("still full at %+v", g.Last())
	}
}

// TestGuardWithoutMaxmemory checks that a Redis without maxmemory is never
// full.
func TestGuardWithoutMaxmemory(t *testing.T) {
	addr := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	g, err := headroom.New(rdb, headroom.Options{Percent: 50})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Read(context.Background())
	if err != nil || r.Max != 0 || r.Limit != 0 || g.Full() {
		t.Fatalf("reading %+v, %v", r, err)
	}
}

// TestGuardReadsEveryClusterMaster checks that on a cluster the guard reads
// each master and keeps the fullest.
func TestGuardReadsEveryClusterMaster(t *testing.T) {
	tg := redistest.Open(t, redistest.Cluster)
	g, err := headroom.New(tg.Client, headroom.Options{Percent: 20})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // ForEachMaster runs the masters concurrently
	var masters []string
	err = tg.Client.(*redis.ClusterClient).ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c.Options().Addr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Read(context.Background())
	if err != nil || r.Used <= 0 || !slices.Contains(masters, r.Node) {
		t.Fatalf("reading %+v, %v; want one of the masters %v", r, err, masters)
	}
}

// TestCheckCountsDeclaredGrowth checks that Check hands the stores its
// percent once the last reading plus the growth declared since passes
// half the limit, before any new reading, and not before; the next
// reading starts the count again.
func TestCheckCountsDeclaredGrowth(t *testing.T) {
	rdb := redistest.OwnServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction").Client
	g, err := headroom.New(rdb, headroom.Options{Percent: 20, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Read(context.Background())
	if err != nil || r.Used > r.Limit/4 {
		t.Fatalf("reading %+v, %v: want an empty server", r, err)
	}
	if pct := g.Check(0); pct != 0 {
		t.Fatalf("Check on an empty server = %d, want 0", pct)
	}
	room := r.Limit/2 - r.Used // what may be declared before the scripts check
	if pct := g.Check(room); pct != 0 {
		t.Fatalf("Check at half the limit = %d, want 0", pct)
	}
	if pct := g.Check(1); pct != 20 {
		t.Fatalf("Check past half the limit = %d, want 20", pct)
	}
	if _, err := g.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pct := g.Check(0); pct != 0 {
		t.Fatalf("Check after a new reading = %d, want 0", pct)
	}
}
