package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// redisEnv is the environment pointing the program at tg.
func redisEnv(tg *redistest.Target) map[string]string {
	if tg.Kind == redistest.Cluster {
		return map[string]string{"REDIS_CLUSTER": os.Getenv(redistest.EnvCluster)}
	}
	return map[string]string{"REDIS_URL": tg.URL}
}

// TestKill9ResourceHoldingsExpire: kill -9 of an instance with holdings:
// they are still held just after, and another instance on the same Redis
// can acquire them once RESOURCE_LEASE has passed.
func TestKill9ResourceHoldingsExpire(t *testing.T) {
	t.Parallel() // mostly waits (a store's first lease, then the dead one's): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		const lease = time.Second
		env := redisEnv(tg)
		env["KEY_PREFIX"] = redistest.Prefix(t)
		env["RESOURCE_STORE"] = "redis"
		env["RESOURCE_LEASE"] = lease.String()
		env["COUNTER_ADDR"] = "127.0.0.1:0"
		procs := []*process{startBinary(t, env), startBinary(t, env)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder, other := servicetest.DialCounters(ctx, t, procs[0].Counters), servicetest.DialCounters(ctx, t, procs[1].Counters)
		// A new store grants nothing for its first lease.
		eventually.True(t, 30*time.Second, "3 of jobs acquired", func() bool {
			_, err := holder.Acquire(ctx, "jobs", 3, 4)
			if err != nil && !errors.Is(err, wire.StatusNotAvailable) {
				t.Fatal(err)
			}
			return err == nil
		})
		procs[0].cmd.Process.Signal(syscall.SIGKILL)
		<-procs[0].done
		killed := time.Now()
		if _, err := other.Acquire(ctx, "jobs", 2, 4); !errors.Is(err, wire.StatusNotAvailable) {
			t.Fatalf("just after the kill: %v, want 0x21", err)
		}
		if v, err := other.Get(ctx, "jobs"); v != 3 || err != nil {
			t.Fatalf("get just after the kill = %d, %v; want 3", v, err)
		}
		eventually.True(t, 30*time.Second, "4 of jobs acquired once the holding expired", func() bool {
			_, err := other.Acquire(ctx, "jobs", 4, 4)
			if err != nil && !errors.Is(err, wire.StatusNotAvailable) {
				t.Fatal(err)
			}
			return err == nil
		})
		// A holding runs out a lease after its last renewal, which is a
		// quarter lease before the kill at most, later on a starved
		// machine: half a lease is the bound a loaded CI run keeps.
		if waited := time.Since(killed); waited < lease/2 || waited > 3*lease {
			t.Fatalf("the dead instance's holdings were free after %v, lease %v", waited, lease)
		}
	})
}

// TestResourceMaxMemory: RESOURCE_MAX_MEMORY caps the resource counters in
// memory; a counter released to 0 makes room for another client's new
// name.
func TestResourceMaxMemory(t *testing.T) {
	addr := startBinary(t, map[string]string{"COUNTER_ADDR": "127.0.0.1:0", "RESOURCE_MAX_MEMORY": "100000"}).Counters
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := servicetest.DialCounters(ctx, t, addr), servicetest.DialCounters(ctx, t, addr)
	long := func(c byte) string { return strings.Repeat(string(c), 65535) } // 64 KiB of the cap each
	if _, err := a.Acquire(ctx, long('a'), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, long('b'), 1, 1); !errors.Is(err, wire.StatusOutOfMemory) {
		t.Fatalf("a second long name past the cap: %v, want 0x82", err)
	}
	if err := a.Release(ctx, long('a'), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, long('b'), 1, 1); err != nil {
		t.Fatalf("after the first was released: %v", err)
	}
}

// TestResourceMaxHoldingsInMemory: RESOURCE_MAX_HOLDINGS caps the names one
// connection holds in the in-memory resource store too: one more is
// refused 0x82 and changes nothing, another connection is not affected,
// and a release makes room again.
func TestResourceMaxHoldingsInMemory(t *testing.T) {
	a := startApp(t, nil, map[string]string{"RESOURCE_MAX_HOLDINGS": "2", "COUNTER_ADDR": "127.0.0.1:0"})
	ctx := t.Context()
	c, other := servicetest.DialCounters(ctx, t, a.CounterAddr()), servicetest.DialCounters(ctx, t, a.CounterAddr())
	for _, name := range []string{"a", "b"} {
		if _, err := c.Acquire(ctx, name, 1, 4); err != nil {
			t.Fatalf("acquire %s: %v", name, err)
		}
	}
	if _, err := c.Acquire(ctx, "c", 1, 4); !errors.Is(err, wire.StatusOutOfMemory) {
		t.Fatalf("a third name on one connection: %v, want 0x82", err)
	}
	if v, err := other.Get(ctx, "c"); err == nil || v != 0 {
		t.Errorf("the refused acquire left c at %d (%v), want no counter", v, err)
	}
	if _, err := other.Acquire(ctx, "c", 1, 4); err != nil {
		t.Errorf("another connection's acquire: %v", err)
	}
	if err := c.Release(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "d", 1, 4); err != nil {
		t.Errorf("after a release: %v", err)
	}
}

// TestBirthRuleVisible: a new resource store in Redis refuses acquires for
// one lease; /stats says until when and why, and so does
// vkcounter_resource_acquires_refused_until_timestamp_seconds.
func TestBirthRuleVisible(t *testing.T) {
	const lease = time.Minute
	a := startApp(t, nil, map[string]string{"RESOURCE_STORE": "redis", "RESOURCE_LEASE": lease.String(), "COUNTER_ADDR": "127.0.0.1:0"})
	c := servicetest.DialCounters(t.Context(), t, a.CounterAddr())
	if _, err := c.Acquire(t.Context(), "jobs", 1, 4); !errors.Is(err, wire.StatusNotAvailable) {
		t.Fatalf("acquire in a new store: %v, want 0x21", err)
	}
	resp, err := http.Get(a.AdminURL("/stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Resources struct {
			RefusedUntil  time.Time `json:"acquires_refused_until"`
			Why           string    `json:"refused_because"`
			YoungRefusals int       `json:"young_refusals"`
		} `json:"resources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Resources
	if now := time.Now(); !r.RefusedUntil.After(now) || r.RefusedUntil.After(now.Add(lease)) || !strings.Contains(r.Why, "younger than one lease") || r.YoungRefusals != 1 {
		t.Errorf("/stats resources %+v: want refused until within a lease from now, why, 1 refusal", r)
	}
	want := fmt.Sprintf("vkcounter_resource_acquires_refused_until_timestamp_seconds %g\n", float64(r.RefusedUntil.UnixMilli())/1000)
	if m := a.ScrapeMetrics(t); !strings.Contains(m, want) || !strings.Contains(m, "vkcounter_resource_young_refusals_total 1\n") {
		t.Errorf("no %q and 1 young refusal in /metrics", want)
	}
}
