package service

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
)

// TestCounterClientsCannotTakeTheBotsHeadroomSoak is the attack on a shared
// Redis (a server of the test's own: maxmemory 8 MiB, noeviction, the
// default headroom of 20 %): one counter client adds distinct 255-byte
// keys to one participant name, pipelined, until its growth has been
// refused a while; another grows window counters (a hit in each new
// second) and unique counters (new keys to sparse sketches); meanwhile
// the webhook is posted to. Every webhook is answered 200 and counted
// exactly; used_memory_peak stays under maxmemory less half the headroom;
// the growth is refused (0x82) and counted as such. A soak: a flood that fills a Redis.
func TestCounterClientsCannotTakeTheBotsHeadroomSoak(t *testing.T) {
	soak.Test(t)
	const maxmemory = 8 << 20
	const headroom = 20 // percent, COUNTERS_REDIS_HEADROOM's default
	tg := redistest.OwnServer(t, "--maxmemory", strconv.Itoa(maxmemory), "--maxmemory-policy", "noeviction")
	a := startApp(t, tg, map[string]string{"COUNTER_ADDR": "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	done := make(chan struct{}) // the participant client is finished

	var wg sync.WaitGroup
	errs := make(chan error, 3)

	// The participant client: 256 visits a round trip, distinct keys of
	// MaxKeyLen bytes, until 2000 were refused (memory freed by the bot's
	// outbox lets a few more through now and then).
	var visited, refusedVisits int
	wg.Go(func() {
		defer close(done)
		visited, refusedVisits = visitUntilRefused(ctx, a.CounterAddr(), 2000, errs)
	})

	// The window and unique client: 20 window counters hit each round (a
	// new entry each second), and 10 new keys added to each of 20 unique
	// names (new ones every 20 rounds, so that some are still sparse and
	// grow), until the participant client is done and it saw both refused.
	var windowRefused, uniqueRefused int
	wg.Go(func() { windowRefused, uniqueRefused = growUntilRefused(ctx, a.CounterAddr(), done, errs) })

	// The webhook, meanwhile: five texts, each from a peer of its own.
	posted := a.postFiveTexts(t, done, nil, "atk", "attack text ")
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every message counted exactly: text k's i-th message is answered i.
	a.checkFiveTexts(t, posted)

	peak := redistest.InfoMemory(t, tg.Client, "used_memory_peak")
	bound := int64(maxmemory - maxmemory*headroom/100/2)
	t.Logf("%d webhooks; %d visits counted, %d refused; %d window hits and %d unique adds refused; used_memory_peak %.1f MiB, bound %.1f MiB",
		posted, visited, refusedVisits, windowRefused, uniqueRefused, float64(peak)/(1<<20), float64(bound)/(1<<20))
	if peak > bound {
		t.Errorf("used_memory_peak %d passed maxmemory less half the headroom, %d", peak, bound)
	}
	if visited == 0 || refusedVisits == 0 || windowRefused == 0 || uniqueRefused == 0 {
		t.Errorf("growth not refused on every kind")
	}
	if m := a.ScrapeMetrics(t); !strings.Contains(m, `vkcounter_counters_growth_refused_total{reason="headroom"} `) ||
		strings.Contains(m, `vkcounter_counters_growth_refused_total{reason="headroom"} 0`+"\n") {
		t.Errorf("growth refusals not in /metrics")
	}
}

// TestHoldingsFloodKeepsTheBotsHeadroomSoak is issue 37's attack through
// resource holdings: RESOURCE_STORE=redis on the bot's Redis (a server of
// the test's own: maxmemory 32 MiB, noeviction), 300 counters created,
// then 600 connections each acquire 1 of every counter (one pipeline of
// 300 each, 2 connections at a time), while webhooks arrive at about 30
// a second. used_memory_peak stays below maxmemory, every webhook is
// answered 200 and every reply is exact, the holdings past the headroom
// are refused (0x82), and once the connections close, within a lease,
// no holding is left. A soak: a flood that fills a Redis, then a lease of the machine's time.
func TestHoldingsFloodKeepsTheBotsHeadroomSoak(t *testing.T) {
	soak.Test(t)
	const maxmemory = 32 << 20
	const counters, conns, together = 300, 600, 2
	const lease = 10 * time.Second
	tg := redistest.OwnServer(t, "--maxmemory", strconv.Itoa(maxmemory), "--maxmemory-policy", "noeviction")
	a := startApp(t, tg, map[string]string{"COUNTER_ADDR": "127.0.0.1:0", "RESOURCE_STORE": "redis", "RESOURCE_LEASE": lease.String()})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Second)
	defer cancel()
	name := func(i int) string { return "lock" + strconv.Itoa(i) }

	// The 300 counters, created and released (they stay until the
	// interval ends, at 0).
	createCounters(ctx, t, a.CounterAddr(), counters, name)

	done := make(chan struct{})
	var acquired, refused, closed atomic.Int64
	var open []*client.Client
	var openMu sync.Mutex
	errs := make(chan error, conns)
	go func() {
		defer close(done)
		sem := make(chan struct{}, together)
		var wg sync.WaitGroup
		for range conns {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				c, err := client.Dial(ctx, a.CounterAddr())
				if err != nil {
					errs <- err
					return
				}
				openMu.Lock()
				open = append(open, c)
				openMu.Unlock()
				p := c.Pipeline()
				for i := range counters {
					p.Acquire(name(i), 1, 1000000)
				}
				res, err := p.Exec(ctx)
				if err != nil {
					// The server closed it: its lease could not be
					// renewed in time while Redis was flooded (the
					// documented answer, counted below).
					closed.Add(1)
					return
				}
				for _, r := range res {
					switch r.Status {
					case wire.StatusOK:
						acquired.Add(1)
					case wire.StatusOutOfMemory:
						refused.Add(1)
					default:
						errs <- fmt.Errorf("acquire: %v", r.Status)
						return
					}
				}
			})
		}
		wg.Wait()
	}()

	// The webhook, meanwhile, at about 30 a second: five texts, each from
	// a peer of its own.
	tick := time.NewTicker(time.Second / 30)
	defer tick.Stop()
	posted := a.postFiveTexts(t, done, tick.C, "hold", "holdings text ")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a.checkFiveTexts(t, posted)
	peak := redistest.InfoMemory(t, tg.Client, "used_memory_peak")
	t.Logf("%d webhooks; %d holdings acquired, %d refused, %d connections closed by the server; used_memory_peak %.1f MiB of %d MiB",
		posted, acquired.Load(), refused.Load(), closed.Load(), float64(peak)/(1<<20), maxmemory>>20)
	if peak >= maxmemory {
		t.Errorf("used_memory_peak %d reached maxmemory %d", peak, maxmemory)
	}

	// The connections close: within a lease every holding is gone.
	closedAt := time.Now()
	for _, c := range open {
		c.Close()
	}
	eventually.NoError(t, lease, "no holding left within a lease", func() error {
		return counterstest.HoldingLeft(ctx, tg.Client, a.Prefix)
	})
	t.Logf("no holding left %v after the connections closed", time.Since(closedAt).Round(100*time.Millisecond))
}

// visitUntilRefused is the participant client of
// TestCounterClientsCannotTakeTheBotsHeadroomSoak: 256 visits a round trip to
// addr, distinct keys of MaxKeyLen bytes, until enough were refused
// (memory freed by the bot's outbox lets a few more through now and
// then). It returns the visits counted and refused; a failure goes to
// errs.
func visitUntilRefused(ctx context.Context, addr string, enough int, errs chan<- error) (visited, refusedVisits int) {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		errs <- err
		return
	}
	defer c.Close()
	for i := 0; refusedVisits < enough; {
		p := c.Pipeline()
		for range 256 {
			p.Visit("room", fmt.Sprintf("%0255d", i), 86400)
			i++
		}
		res, err := p.Exec(ctx)
		if err != nil {
			errs <- fmt.Errorf("visits: %w", err)
			return
		}
		refused := 0
		for _, r := range res {
			switch r.Status {
			case wire.StatusOK:
				visited++
			case wire.StatusOutOfMemory:
				refused++
			default:
				errs <- fmt.Errorf("visit: %v", r.Status)
				return
			}
		}
		refusedVisits += refused
	}
	return visited, refusedVisits
}

// growUntilRefused is the window and unique client of
// TestCounterClientsCannotTakeTheBotsHeadroomSoak: 20 window counters hit each
// round (a new entry each second), and 10 new keys added to each of 20
// unique names (new ones every 20 rounds, so that some are still sparse
// and grow), until done is closed and it saw both refused. It returns the
// refusals of each; a failure goes to errs.
func growUntilRefused(ctx context.Context, addr string, done <-chan struct{}, errs chan<- error) (windowRefused, uniqueRefused int) {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		errs <- err
		return
	}
	defer c.Close()
	keys := make([]string, 10)
	for round := 0; ; round++ {
		select {
		case <-done:
			if windowRefused > 0 && uniqueRefused > 0 {
				return windowRefused, uniqueRefused
			}
		default:
		}
		p := c.Pipeline()
		for n := range 20 {
			p.WindowHit("w"+strconv.Itoa(n), 86400)
			for k := range keys {
				keys[k] = fmt.Sprintf("%d.%d.%d", round, n, k)
			}
			p.UniqueAdd(fmt.Sprintf("u%d.%d", round/20, n), keys)
		}
		res, err := p.Exec(ctx)
		if err != nil {
			errs <- fmt.Errorf("window and unique: %w", err)
			return
		}
		for _, r := range res {
			switch {
			case r.Status == wire.StatusOK:
			case r.Status != wire.StatusOutOfMemory:
				errs <- fmt.Errorf("%v: %v", r.Op, r.Status)
				return
			case r.Op == wire.OpWindowHit:
				windowRefused++
			default:
				uniqueRefused++
			}
		}
	}
}

// postFiveTexts posts to the webhook until done is closed, one event at
// each tick of pace (nil: at once): five texts in turn ("text" and 0 to
// 4), each from a peer of its own (7000 to 7004), event ids starting with
// id. Each must be answered 200 ok. It returns how many it posted.
func (a *app) postFiveTexts(t *testing.T, done <-chan struct{}, pace <-chan time.Time, id, text string) int {
	t.Helper()
	posted := 0
	for stop := false; !stop; {
		if pace == nil {
			select {
			case <-done:
				stop = true
			default:
			}
		} else {
			select {
			case <-done:
				stop = true
			case <-pace:
			}
		}
		k := posted % 5
		if code, body, _ := a.Post(t, event(fmt.Sprint(id, posted), 7000+k, posted+1, text+strconv.Itoa(k)), nil); code != 200 || body != "ok" {
			t.Fatalf("webhook %d during the attack: %d %q, want 200 ok", posted, code, body)
		}
		posted++
	}
	return posted
}

// checkFiveTexts checks postFiveTexts's replies, posted of them: text k's
// i-th message is answered i, every message counted exactly.
func (a *app) checkFiveTexts(t *testing.T, posted int) {
	t.Helper()
	got := map[int][]string{}
	for _, s := range a.WaitSends(t, posted) {
		got[s.PeerID] = append(got[s.PeerID], s.Message)
	}
	for text := range 5 {
		var want []string
		for i := 0; i*5+text < posted; i++ {
			want = append(want, strconv.Itoa(i))
		}
		if g := strings.Join(got[7000+text], ","); g != strings.Join(want, ",") {
			t.Errorf("text %d answered %s, want %s", text, g, strings.Join(want, ","))
		}
	}
}

// createCounters creates n resource counters (name(0) to name(n-1)) on the
// port at addr, acquired and released: they stay until the interval ends,
// at 0. A new Redis refuses acquires for a lease (the birth rule): the
// first is tried until granted.
func createCounters(ctx context.Context, t *testing.T, addr string, n int, name func(int) string) {
	t.Helper()
	creator, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer creator.Close()
	eventually.NoError(t, 20*time.Second, "the first acquire granted", func() error {
		_, err := creator.Acquire(ctx, name(0), 1, 1000000)
		return err
	})
	if err := creator.Release(ctx, name(0), 1); err != nil {
		t.Fatal(err)
	}
	p := creator.Pipeline()
	for i := range n {
		p.Acquire(name(i), 1, 1000000)
		p.Release(name(i), 1)
	}
	res, err := p.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != wire.StatusOK {
			t.Fatalf("creating the counters: %v %v", r.Op, r.Status)
		}
	}
}
