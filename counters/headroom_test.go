package counters_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/httpapi"
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

// TestHeadroomRefusesNewNamesOnly runs every kind on a Redis the guard
// finds full, through the port and HTTP: names that exist keep counting
// exactly, new ones get Out of memory (HTTP 507 naming the limit), and
// nothing of them is written.
func TestHeadroomRefusesNewNamesOnly(t *testing.T) {
	rdb, g := fullGuard(t)
	prefix := redistest.Prefix(t)
	cx := ctx(t)

	// The names that exist, created without the guard.
	plainAccess := redisAccess(t, rdb, prefix)
	plainWindows, err := window.NewRedis(rdb, prefix)
	if err != nil {
		t.Fatal(err)
	}
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
	active, isNew, err := c.Visit(cx, "old", "b", time.Minute)
	must("visit old", int64(active), 2, err)
	if !isNew {
		t.Error("visit old: key b not new")
	}
	_, _, err = c.Visit(cx, "new", "b", time.Minute)
	oom("visit new", err)
	n, err = c.WindowHit(cx, "old", time.Minute)
	must("window hit old", n, 1, err)
	_, err = c.WindowHit(cx, "old", time.Hour) // another window: another counter
	oom("window hit old, another window", err)
	_, err = c.WindowHit(cx, "new", time.Minute)
	oom("window hit new", err)
	if changed, err := c.UniqueAdd(cx, "old", []string{"b"}); err != nil || !changed {
		t.Errorf("unique add old: %v, %v", changed, err)
	}
	_, err = c.UniqueAdd(cx, "new", []string{"b"})
	oom("unique add new", err)
	got, err := c.Acquire(cx, "old", 2, 3)
	must("acquire old", int64(got), 2, err)
	_, err = c.Acquire(cx, "new", 1, 3)
	oom("acquire new", err)
	// The refused acquire left the connection and its holding alone.
	if err := c.Release(cx, "old", 2); err != nil {
		t.Errorf("release old after a refused acquire: %v", err)
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
	if got := g.Refusals(); got != 12 {
		t.Errorf("%d refusals counted, want 12", got)
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
