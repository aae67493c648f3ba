package counters_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// fullGuard returns a client of a Redis of the test's own and a guard
// that finds it full: a headroom of 99% of a 64 MiB maxmemory leaves less
// than an empty Redis uses.
func fullGuard(t *testing.T) (redis.UniversalClient, *headroom.Guard) {
	t.Helper()
	rdb := redistest.OwnServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction").Client
	g, err := headroom.New(rdb, headroom.Options{Percent: 99, Setting: "COUNTERS_REDIS_HEADROOM"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := g.Read(context.Background()); err != nil || !r.Full() {
		t.Fatalf("guard reading %+v, %v: want full", r, err)
	}
	return rdb, g
}

// TestHeadroomRefusesNewNamesAndGrowth runs every kind on a Redis the
// guard finds full, through the port and HTTP: names that exist keep
// counting exactly where they do not grow, new ones and growth get Out of
// memory (HTTP 507 naming the limit), and nothing of them is written.
func TestHeadroomRefusesNewNamesAndGrowth(t *testing.T) {
	rdb, g := fullGuard(t)
	prefix := redistest.Prefix(t)
	cx := ctx(t)

	// The names that exist, created without the guard.
	plainAccess := redisAccess(t, rdb, prefix)
	plainWindows, err := window.NewRedis(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	clock := func() time.Time { return at } // one second for the window hits
	plainWindows = plainWindows.WithClock(clock)
	plainUniques, err := unique.NewRedis(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plainAccess.Add(cx, "old", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := plainAccess.AddOnce(cx, "old.once", 1, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := redisParticipants(t, rdb, prefix).VisitMany(cx, "old", []string{"a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := plainWindows.Hit(cx, "old", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := plainUniques.Add(cx, "old", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	plainRes, err := resource.NewRedis(cx, rdb, resource.RedisOptions{Prefix: prefix, AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plainRes.Close()
	if err := plainRes.NewHolder(nil).Acquire(cx, []byte("old"), 1, 3); err != nil {
		t.Fatal(err)
	}
	keysBefore := redistest.Keys(t, rdb, prefix)

	// The guarded stores, served on the port and over HTTP.
	a := redisAccess(t, rdb, prefix)
	a.SetGuard(g)
	p := redisParticipants(t, rdb, prefix)
	p.SetGuard(g)
	w, _ := window.NewRedis(rdb, prefix)
	w.SetGuard(g)
	w = w.WithClock(clock)
	u, _ := unique.NewRedis(rdb, prefix)
	u.SetGuard(g)
	res, err := resource.NewRedis(cx, rdb, resource.RedisOptions{Prefix: prefix, Guard: g, AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	stores := counters.Stores{Access: a, Participants: p, Windows: w, Uniques: u}
	c := dialClient(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores, Resources: counters.RedisResources(res)})))

	oom := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, wire.StatusOutOfMemory) {
			t.Errorf("%s: %v, want Out of memory", what, err)
		}
	}
	must := func(what string, got, want int64, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", what, got, err, want)
		}
	}
	n, err := c.Hit(cx, "old")
	must("hit old", n, 6, err)
	n, err = c.Add(cx, "old", 4)
	must("add old", n, 10, err)
	_, err = c.Hit(cx, "new")
	oom("hit new", err)
	_, err = c.Add(cx, "new", 4)
	oom("add new", err)
	n, err = a.AddOnce(cx, "old.once", 2, "t1")
	must("add once old", n, 3, err)
	_, err = a.AddOnce(cx, "new.once", 2, "t1")
	if !errors.Is(err, access.ErrNoMemory) || !strings.Contains(err.Error(), "COUNTERS_REDIS_HEADROOM") {
		t.Errorf("add once new: %v", err)
	}
	active, isNew, err := c.Visit(cx, "old", "a", time.Minute)
	must("visit old", int64(active), 1, err)
	if isNew {
		t.Error("visit old: key a new")
	}
	_, _, err = c.Visit(cx, "old", "b", time.Minute)
	oom("visit old, a new key", err)
	_, _, err = c.Visit(cx, "new", "b", time.Minute)
	oom("visit new", err)
	n, err = c.WindowHit(cx, "old", time.Minute)
	must("window hit old", n, 1, err)
	_, err = c.WindowHit(cx, "old", time.Hour) // another window: another counter
	oom("window hit old, another window", err)
	_, err = c.WindowHit(cx, "new", time.Minute)
	oom("window hit new", err)
	if _, err := w.WithClock(func() time.Time { return at.Add(time.Second) }).Hit(cx, "old", time.Minute); !errors.Is(err, window.ErrNoMemory) {
		t.Errorf("window hit old in a new second: %v, want out of memory", err)
	}
	if changed, err := c.UniqueAdd(cx, "old", []string{"a"}); err != nil || changed {
		t.Errorf("unique add old: %v, %v", changed, err)
	}
	_, err = c.UniqueAdd(cx, "old", []string{"b"})
	oom("unique add old, a new key", err)
	_, err = c.UniqueAdd(cx, "new", []string{"b"})
	oom("unique add new", err)
	// A new holding of a counter that exists grows Redis (a hash field
	// and a lease member) as a new counter does.
	_, err = c.Acquire(cx, "old", 2, 3)
	oom("acquire old, a new holding", err)
	_, err = c.Acquire(cx, "new", 1, 3)
	oom("acquire new", err)
	// The refused acquires left the connection usable.
	if got, err := c.Get(cx, "old"); err != nil || got != 1 {
		t.Errorf("get old after refused acquires: %d, %v; want 1", got, err)
	}

	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpCall{"POST", "/counters/access/old", "", 200, `{"name":"old","total":11}`}.do(t, h)
	for _, c := range []httpCall{
		{"POST", "/counters/access/new", "", 507, "COUNTERS_REDIS_HEADROOM"},
		{"POST", "/counters/participants/new/visit", `{"key":"k"}`, 507, "maxmemory 64.0 MiB"},
		{"POST", "/counters/windows/new", `{"window":60}`, 507, "99% is kept for the bot"},
		{"POST", "/counters/uniques/new", `{"keys":["k"]}`, 507, "out of memory for new counter names"},
	} {
		c.do(t, h)
	}
	if got := g.Refusals(); got != 13 {
		t.Errorf("%d refusals counted, want 13", got)
	}
	if got := g.GrowthRefusals(); got != 3 {
		t.Errorf("%d growth refusals counted, want 3", got)
	}

	// Nothing of the refused names was written: the keys are those of
	// before (plus the token of AddOnce on the old name).
	keysAfter := redistest.Keys(t, rdb, prefix)
	for _, k := range keysAfter {
		if strings.Contains(k, "new") || !slices.Contains(keysBefore, k) && !strings.Contains(k, ":once:t1") {
			t.Errorf("key %q written by a refused request", k)
		}
	}
	names, err := rdb.ZRange(cx, prefix+"a:index", 0, -1).Result()
	if err != nil || !slices.Equal(names, []string{"old", "old.once"}) {
		t.Errorf("access index %q, %v; want the old names only", names, err)
	}
	if _, err := plainAccess.Total(cx, "new"); !errors.Is(err, access.ErrNotFound) {
		t.Errorf("total of new: %v", err)
	}
}

// TestScriptsRefusedWholeUnderMaxmemory runs every counter script that may
// grow Redis on a real server past its maxmemory (noeviction: redistest.PastMaxmemory), with no
// guard, on names whose first change would otherwise be a deletion (keys
// that expired): Redis refuses each whole (OOM), and nothing of the names
// changes. Deletions alone (a participant Leave) still run.
func TestScriptsRefusedWholeUnderMaxmemory(t *testing.T) {
	rdb := redistest.OwnServer(t).Client
	prefix := redistest.Prefix(t)
	cx := ctx(t)
	t0 := time.Now()
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }

	a := redisAccess(t, rdb, prefix)
	p := redisParticipants(t, rdb, prefix)
	w, err := window.NewRedis(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	u, err := unique.NewRedis(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
	res, err := resource.NewRedis(cx, rdb, resource.RedisOptions{Prefix: prefix, AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	// The names, each with what a later call would delete first: a
	// participant key and a window second that expire within 2 s.
	if _, err := a.Add(cx, "old", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddOnce(cx, "old", 1, "t0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.WithClock(at(0)).VisitMany(cx, "old", []string{"a", "b"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WithClock(at(0)).Hit(cx, "old", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Add(cx, "old", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := res.NewHolder(nil).Acquire(cx, []byte("old"), 1, 3); err != nil {
		t.Fatal(err)
	}

	redistest.PastMaxmemory(t, rdb)
	before := dumpKeys(t, rdb, prefix)

	oom := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "OOM command not allowed") {
			t.Errorf("%s: %v, want Redis's OOM", what, err)
		}
	}
	_, err = a.Add(cx, "old", 1)
	oom("access add", err)
	_, err = a.AddOnce(cx, "old", 1, "t1")
	oom("access add once", err)
	// 10 s later "a" and "b" expired: the script would drop them first.
	_, _, err = p.WithClock(at(10*time.Second)).VisitMany(cx, "old", []string{"c"}, time.Second)
	oom("participant visit", err)
	_, err = w.WithClock(at(10*time.Second)).Hit(cx, "old", time.Second)
	oom("window hit", err)
	_, err = u.Add(cx, "old", []string{"b", "c", "d"})
	oom("unique add", err)
	err = res.NewHolder(nil).Acquire(cx, []byte("old"), 1, 3)
	if !errors.Is(err, resource.ErrStore) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("resource acquire: %v, want Redis's OOM", err)
	}
	// The scripts of the stores near their guard's limit: on names that
	// exist, what they would write is Redis's to refuse.
	g, err := headroom.New(rdb, headroom.Options{Percent: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Read(cx); err != nil || g.Check(0) != 1 {
		t.Fatalf("a guard past its limit: %v, check %d", err, g.Check(0))
	}
	ga := redisAccess(t, rdb, prefix)
	ga.SetGuard(g)
	_, err = ga.Add(cx, "old", 1) // the checked script, whose first write is INCRBY
	oom("access add near the limit", err)
	gu, _ := unique.NewRedis(rdb, prefix)
	gu.SetGuard(g)
	_, err = gu.Add(cx, "old", []string{"b", "c", "d"}) // the checked script, whose first write is PFADD
	oom("unique add near the limit", err)
	after := dumpKeys(t, rdb, prefix)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed under maxmemory", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s written under maxmemory", k)
		}
	}
	// A deletion still runs.
	if n, removed, err := p.Leave(cx, "old", "a"); err != nil || !removed || n != 1 {
		t.Errorf("participant leave under maxmemory: %d, %v, %v", n, removed, err)
	}
}

// dumpKeys returns the DUMP of every key under prefix.
func dumpKeys(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	for _, k := range redistest.Keys(t, rdb, prefix) {
		v, err := rdb.Dump(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	return m
}

// TestHeadroomLetsWhatDoesNotGrow checks, past the headroom, the writes
// to names that exist that take no more room than they free: a
// participant visit of a new key while as many expired keys are dropped,
// a window hit in a new second while an older second leaves the window,
// and a unique add to a dense sketch; and that one more key, one more
// second or a sparse sketch's growth is refused.
func TestHeadroomLetsWhatDoesNotGrow(t *testing.T) {
	rdb, g := fullGuard(t)
	prefix := redistest.Prefix(t)
	cx := ctx(t)
	t0 := time.Now()
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }

	plainP := redisParticipants(t, rdb, prefix)
	p := redisParticipants(t, rdb, prefix)
	p.SetGuard(g)
	if _, _, err := plainP.WithClock(at(0)).VisitMany(cx, "room", []string{"a", "b"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// 20 s later a and b expired: two new keys fit, three do not.
	if _, _, err := p.WithClock(at(20*time.Second)).VisitMany(cx, "room", []string{"c", "d", "e"}, 10*time.Second); !errors.Is(err, participant.ErrNoMemory) {
		t.Errorf("three new keys for two expired: %v, want ErrNoMemory", err)
	}
	if n, added, err := p.WithClock(at(20*time.Second)).VisitMany(cx, "room", []string{"c", "d"}, 10*time.Second); err != nil || n != 2 || added != 2 {
		t.Errorf("two new keys for two expired: %d, %d, %v", n, added, err)
	}

	plainW, _ := window.NewRedis(rdb, prefix)
	w, _ := window.NewRedis(rdb, prefix)
	w.SetGuard(g)
	if _, err := plainW.WithClock(at(0)).Hit(cx, "w", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WithClock(at(5*time.Second)).Hit(cx, "w", 10*time.Second); !errors.Is(err, window.ErrNoMemory) {
		t.Errorf("a hit in a new second while none leaves: %v, want ErrNoMemory", err)
	}
	if n, err := w.WithClock(at(0)).Hit(cx, "w", 10*time.Second); err != nil || n != 1 {
		t.Errorf("a hit in the newest second: %d, %v", n, err)
	}
	if n, err := w.WithClock(at(15*time.Second)).Hit(cx, "w", 10*time.Second); err != nil || n != 0 {
		t.Errorf("a hit in a new second while the oldest leaves: %d, %v", n, err)
	}

	plainU, _ := unique.NewRedis(rdb, prefix)
	u, _ := unique.NewRedis(rdb, prefix)
	u.SetGuard(g)
	keys := make([]string, 1000)
	for i := range 5 { // 5000 keys: dense
		for j := range keys {
			keys[j] = fmt.Sprint(i*1000 + j)
		}
		if _, err := plainU.Add(cx, "dense", keys); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := u.Add(cx, "dense", []string{"x", "y", "z"}); err != nil {
		t.Errorf("an add to a dense sketch: %v", err)
	}
	if _, err := plainU.Add(cx, "sparse", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.Get(cx, prefix+"u:{sparse}").Result()
	if _, err := u.Add(cx, "sparse", []string{"b", "c", "d"}); !errors.Is(err, unique.ErrNoMemory) {
		t.Errorf("an add growing a sparse sketch: %v, want ErrNoMemory", err)
	}
	if after, _ := rdb.Get(cx, prefix+"u:{sparse}").Result(); after != before {
		t.Error("the refused add changed the sparse sketch")
	}
	if changed, err := u.Add(cx, "sparse", []string{"a"}); err != nil || changed {
		t.Errorf("an add of a key the sparse sketch has: %v, %v", changed, err)
	}
	if got := g.GrowthRefusals(); got != 3 {
		t.Errorf("%d growth refusals, want 3", got)
	}
}
