package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
)

// acquireBorn acquires 1 of 2 of name through c, waiting (bounded by
// ctx) for the first lease of a new resource store, which grants nothing.
func acquireBorn(ctx context.Context, t *testing.T, c *client.Client, name string) {
	t.Helper()
	within := time.Minute
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	eventually.True(t, within, "acquire "+name+" past the first lease", func() bool {
		_, err := c.Acquire(ctx, name, 1, 2)
		if err != nil && !errors.Is(err, wire.StatusNotAvailable) {
			t.Fatalf("acquire %s: %v", name, err)
		}
		return err == nil
	})
}

// TestCounterClientCannotFillTheBotsRedisSoak fills a maxmemory Redis shared
// by the bot and the counters with new access, window, unique, participant
// and resource names over the port while the webhook is posted to: every
// webhook answers 200 and every count is exact, the counter client gets
// Out of memory (HTTP 507 naming the limit) once the headroom is reached,
// and the names that existed keep counting. A soak: a flood that fills a Redis.
func TestCounterClientCannotFillTheBotsRedisSoak(t *testing.T) {
	soak.Test(t)
	tg := redistest.OwnServer(t, "--maxmemory", "24mb", "--maxmemory-policy", "noeviction")
	// A lease holds only while the service gets the CPU to renew it: 1 s
	// ran out under the flood at load 17 (a flood connection between its
	// acquire and release was closed, not refused); 4 s leaves 3 s of
	// starvation, as in counters' TestConcurrentAcquireAcrossInstances.
	a := startApp(t, tg, env("COUNTERS_REDIS_HEADROOM", "40", "RESOURCE_STORE", "redis", "RESOURCE_LEASE", "4s"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, a.CounterAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The names that exist before the flood.
	createKept(ctx, t, cl)

	// The flood: 4 connections, new names of 200 bytes, each kind in turn,
	// until every kind was refused and a second has passed since.
	pad := strings.Repeat("x", 200)
	f := &nameFlood{}
	for g := range 4 {
		f.wg.Go(func() { f.run(ctx, a.CounterAddr(), fmt.Sprintf("%s%d", pad, g)) })
	}

	// The bot, meanwhile: one text posted over and over, each answer 200.
	const texts = 5
	posted := 0
	deadline := time.Now().Add(90 * time.Second)
	var allRefusedAt time.Time
	for time.Now().Before(deadline) {
		for k := range texts {
			code, body, _ := a.Post(t, event(fmt.Sprintf("e%d", posted), 7000+k, posted+1, fmt.Sprintf("flood %d", k)), nil)
			if code != 200 || body != "ok" {
				t.Fatalf("webhook %d answered %d %q during the flood (%d names created)", posted, code, body, f.created.Load())
			}
			posted++
		}
		if f.allRefused() && allRefusedAt.IsZero() {
			allRefusedAt = time.Now()
		}
		if !allRefusedAt.IsZero() && time.Since(allRefusedAt) > time.Second || f.failed.Load() {
			break
		}
		// VK's pace: the next events once the replies to these arrived
		// (the bot keeps answering through the flood).
		a.WaitSends(t, posted)
	}
	f.stop.Store(true)
	f.wg.Wait()
	if f.err != nil {
		t.Fatalf("a counter request failed otherwise than Out of memory: %v", f.err)
	}
	if allRefusedAt.IsZero() {
		t.Fatalf("not every kind refused within the time: %d created, refused by kind %v", f.created.Load(), []int64{f.refused[0].Load(), f.refused[1].Load(), f.refused[2].Load(), f.refused[3].Load(), f.refused[4].Load()})
	}
	t.Logf("%d names created, %d webhooks posted; refused by kind: access %d, window %d, unique %d, participant %d, resource %d",
		f.created.Load(), posted, f.refused[0].Load(), f.refused[1].Load(), f.refused[2].Load(), f.refused[3].Load(), f.refused[4].Load())

	// Exact counts: each text's answers are 0, 1, 2, … once each.
	a.checkEachOnce(t, posted)

	// The bot's replies, sent, left Redis: fill it again up to the limit
	// (bounded), so the checks below find it full.
	refill(ctx, t, cl, pad)
	f.refused[0].Add(1)
	checkKeptAfterFlood(ctx, t, a, cl)

	// The refusals are counted.
	resp, err := http.Get(a.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var total int64
	for k := range f.refused {
		total += f.refused[k].Load()
	}
	for _, want := range []string{
		"vkcounter_counters_redis_full 1",
		fmt.Sprintf("vkcounter_counters_redis_new_names_refused_total %d", total+2), // + fresh over the port and HTTP
		`vkcounter_counters_http_requests_total{code="507",method="POST",route="/counters/access/{name}"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestCountersOnTheirOwnRedis checks that with COUNTERS_REDIS_URL every
// counter key (access, participant, window, unique, resource, and the
// bot's activity counters) goes to the counters' Redis, and none to the
// bot's.
func TestCountersOnTheirOwnRedis(t *testing.T) {
	bots := redistest.OwnServer(t)
	cnts := redistest.OwnServer(t)
	a := startApp(t, bots, env("COUNTERS_REDIS_URL", cnts.URL, "RESOURCE_STORE", "redis", "RESOURCE_LEASE", "1s"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, a.CounterAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a.MustOK(t, event("o1", 8000, 1, "own redis"))
	a.WaitSends(t, 1)
	if _, err := c.Hit(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WindowHit(ctx, "x", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UniqueAdd(ctx, "x", []string{"k"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Visit(ctx, "x", "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	acquireBorn(ctx, t, c, "x")
	a.MustAPI(t, "POST", "/counters/access/y", "", 200, `{"name":"y","total":1}`)
	a.waitTotal(t, "vk.messages", 1) // the bot's activity
	cntKeys := redistest.Keys(t, cnts.Client, a.Prefix)
	for _, part := range []string{"a:{x}", "a:{y}", "a:{vk.messages}", "p:{x}", "p:{vk.users}", "u:{x}", "w:{x}", "r:"} {
		found := false
		for _, k := range cntKeys {
			found = found || strings.Contains(k, part)
		}
		if !found {
			t.Errorf("no key with %q in the counters' Redis: %q", part, cntKeys)
		}
	}
	for _, k := range redistest.Keys(t, bots.Client, a.Prefix) {
		if rest := strings.TrimPrefix(k, a.Prefix); !strings.HasPrefix(rest, "f:") && !strings.HasPrefix(rest, "o:") && !strings.HasPrefix(rest, "t:") {
			t.Errorf("key %q in the bot's Redis: the bot's keys are f: (counting), o: (outbox) and t: (the tokens' pace)", k)
		}
	}
}

// createKept creates, through cl, the names that
// TestCounterClientCannotFillTheBotsRedisSoak keeps counting after its
// flood: an access counter at 10, window counters of a second and of an
// hour, a resource counter.
func createKept(ctx context.Context, t *testing.T, cl *client.Client) {
	t.Helper()
	if _, err := cl.Add(ctx, "keep", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WindowHit(ctx, "keep1s", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WindowHit(ctx, "keep", time.Hour); err != nil {
		t.Fatal(err)
	}
	acquireBorn(ctx, t, cl, "keep")
}

// A nameFlood creates new names of every kind in turn over the counter
// port, from several connections (run), until stop.
type nameFlood struct {
	refused [5]atomic.Int64 // by kind: access, window, unique, participant, resource
	created atomic.Int64
	stop    atomic.Bool
	err     error       // the first failure but Out of memory; set once, read after wg.Wait
	failed  atomic.Bool // err is set
	errOnce sync.Once
	wg      sync.WaitGroup
}

// fail records err, the flood's first failure.
func (f *nameFlood) fail(err error) {
	f.errOnce.Do(func() { f.err = err; f.failed.Store(true) })
}

// allRefused reports whether every kind was refused at least once.
func (f *nameFlood) allRefused() bool {
	for k := range f.refused {
		if f.refused[k].Load() == 0 {
			return false
		}
	}
	return true
}

// run creates names prefix.0, prefix.1, … on a connection of its own to
// addr, at most 200,000, until stop or a failure.
func (f *nameFlood) run(ctx context.Context, addr, prefix string) {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		f.fail(err)
		return
	}
	defer c.Close()
	for i := 0; i < 200_000 && !f.stop.Load(); i++ {
		name := fmt.Sprintf("%s.%d", prefix, i)
		kind := i % 5
		err := createName(ctx, c, kind, name)
		switch {
		case err == nil:
			f.created.Add(1)
		case errors.Is(err, wire.StatusOutOfMemory):
			f.refused[kind].Add(1)
		default:
			f.fail(fmt.Errorf("kind %d, name %d: %w", kind, i, err))
			return
		}
	}
}

// createName creates a counter of kind (nameFlood.refused's order) named
// name through c.
func createName(ctx context.Context, c *client.Client, kind int, name string) (err error) {
	switch kind {
	case 0:
		_, err = c.Hit(ctx, name)
	case 1:
		_, err = c.WindowHit(ctx, name, time.Hour)
	case 2:
		_, err = c.UniqueAdd(ctx, name, []string{"k1", "k2", "k3"})
	case 3:
		_, _, err = c.Visit(ctx, name, "k", time.Hour)
	case 4:
		// Released at once: the counter stays until the interval's end,
		// and no lease is left to renew.
		if _, err = c.Acquire(ctx, name, 1, 2); err == nil {
			err = c.Release(ctx, name, 1)
		}
	}
	return err
}

// checkEachOnce checks the replies to posted messages: each peer's
// answers are 0, 1, 2, … once each.
func (a *app) checkEachOnce(t *testing.T, posted int) {
	t.Helper()
	got := map[int][]int{}
	for _, s := range a.WaitSends(t, posted) {
		v, err := strconv.Atoi(s.Message)
		if err != nil {
			t.Fatalf("reply %q", s.Message)
		}
		got[s.PeerID] = append(got[s.PeerID], v)
	}
	for peer, answers := range got {
		sort.Ints(answers)
		for i, v := range answers {
			if v != i {
				t.Fatalf("peer %d answers %v, want 0..%d each once", peer, answers, len(answers)-1)
			}
		}
	}
}

// refill hits new access counters (pad again.0, …) through cl until one is
// refused Out of memory, at most 100,000.
func refill(ctx context.Context, t *testing.T, cl *client.Client, pad string) {
	t.Helper()
	for i := 0; ; i++ {
		_, err := cl.Hit(ctx, fmt.Sprintf("%sagain.%d", pad, i))
		if errors.Is(err, wire.StatusOutOfMemory) {
			return
		}
		if err != nil || i == 100_000 {
			t.Fatalf("refill %d: %v", i, err)
		}
	}
}

// checkKeptAfterFlood checks a full counters' Redis: the names createKept
// made keep counting; new ones are refused, over HTTP too.
func checkKeptAfterFlood(ctx context.Context, t *testing.T, a *app, cl *client.Client) {
	t.Helper()
	if n, err := cl.Hit(ctx, "keep"); err != nil || n != 11 {
		t.Errorf("hit keep after the flood: %d, %v; want 11", n, err)
	}
	// A window hit in a new second grows its counter: refused, unless an
	// older second leaves the window as it enters (keep1s's, a second).
	if _, err := cl.WindowHit(ctx, "keep", time.Hour); !errors.Is(err, wire.StatusOutOfMemory) {
		t.Errorf("window hit keep in a new second after the flood: %v; want Out of memory", err)
	}
	if n, err := cl.WindowHit(ctx, "keep1s", time.Second); err != nil || n != 0 {
		t.Errorf("window hit keep1s after the flood: %d, %v; want 0", n, err)
	}
	if _, err := cl.Hit(ctx, "fresh"); !errors.Is(err, wire.StatusOutOfMemory) {
		t.Errorf("hit fresh after the flood: %v, want Out of memory", err)
	}
	code, body := a.API(t, "POST", "/counters/access/fresh", "")
	if code != http.StatusInsufficientStorage || !strings.Contains(body, "COUNTERS_REDIS_HEADROOM") || !strings.Contains(body, "maxmemory 24.0 MiB") {
		t.Errorf("POST /counters/access/fresh: %d %s; want 507 naming the limit", code, body)
	}
	a.MustAPI(t, "POST", "/counters/access/keep", "", 200, `{"name":"keep","total":12}`)
}
