package resource_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// openNew opens a store that does not assume a new prefix holds nothing,
// as the service does.
func openNew(t testing.TB, rdb redis.UniversalClient, prefix string, lease time.Duration, log zerolog.Logger) *resource.Redis {
	t.Helper()
	r, err := resource.NewRedis(bg(), rdb, resource.RedisOptions{Prefix: prefix, Lease: lease, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRedisYoungStoreRefuses: a store refuses every acquire, with "not
// available" and without creating the counter, until one lease after its
// birth (its first start, or Redis losing its data: here FLUSHALL); a
// holder whose holding vanished with the data learns it at its next
// acquire. Redis's clock is miniredis's.
func TestRedisYoungStoreRefuses(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	start := time.Unix(1_000_000_000/86400*86400+3600, 0)
	tg.Mini.SetTime(start)
	const lease = time.Minute // no renewal or check runs during the test
	prefix := redistest.Prefix(t)
	log := &syncbuf.Buffer{}
	r := openNew(t, tg.Client, prefix, lease, zerolog.New(log))
	if !strings.Contains(log.String(), "born less than a lease ago") {
		t.Fatalf("a new store did not say it refuses for a lease: %s", log)
	}
	var lost atomic.Bool
	h := r.NewHolder(func() { lost.Store(true) })
	name := []byte("jobs")
	wantErr(t, "acquire in a new store", h.Acquire(bg(), name, 1, 4), resource.ErrNotAvailable)
	if _, err := r.Get(bg(), name); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("a refused acquire created the counter: %v", err)
	}
	if !strings.Contains(log.String(), "younger than one lease") {
		t.Fatalf("the refusal was not logged: %s", log)
	}
	if until, ok := r.RefusedUntil(); !ok || until.After(time.Now().Add(lease)) || r.YoungRefusals() != 1 {
		t.Fatalf("RefusedUntil = %v, %v, %d refusals; want within a lease from now, 1", until, ok, r.YoungRefusals())
	}
	tg.Mini.SetTime(start.Add(lease - time.Millisecond))
	wantErr(t, "acquire just before a lease", h.Acquire(bg(), name, 1, 4), resource.ErrNotAvailable)
	tg.Mini.SetTime(start.Add(lease))
	wantErr(t, "acquire a lease after the birth", h.Acquire(bg(), name, 3, 4), nil)

	// Redis loses its data.
	flushed := start.Add(lease + time.Second)
	tg.Mini.SetTime(flushed)
	tg.Mini.FlushAll()
	other := r.NewHolder(nil)
	for _, at := range []time.Duration{0, lease / 2, lease - time.Millisecond} {
		tg.Mini.SetTime(flushed.Add(at))
		wantErr(t, "another acquire after the flush", other.Acquire(bg(), name, 1, 4), resource.ErrNotAvailable)
	}
	if err := h.Acquire(bg(), name, 1, 4); !errors.Is(err, resource.ErrStore) || !lost.Load() {
		t.Fatalf("the holder's acquire after the flush: %v, failed %v; want ErrStore and failed", err, lost.Load())
	}
	h.ReleaseAll(bg())
	tg.Mini.SetTime(flushed.Add(lease))
	wantErr(t, "a lease after the flush", other.Acquire(bg(), name, 4, 4), nil)
}

// TestRedisLosesItsData: a Redis without persistence restarts, or is
// flushed, while a client holds 3 of 4 through instance A. A closes the
// client's connection at its next renewal, and instance B is refused
// until one lease after the loss: at no moment do both hold.
func TestRedisLosesItsData(t *testing.T) {
	t.Parallel() // mostly waits (leases, deadlines, a stall): alongside the other waiting tests
	// Each loss on a server of its own: the two wait together.
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, loss := range []string{"restart", "flushall"} {
		wg.Go(func() {
			t.Run(loss, func(t *testing.T) {
				tg := redistest.OwnServer(t)
				const lease = 2 * time.Second
				prefix := redistest.Prefix(t)
				ra := openNew(t, tg.NoRetryClient(t, ""), prefix, lease, zerolog.Nop())
				rb := openNew(t, tg.NoRetryClient(t, ""), prefix, lease, zerolog.Nop())
				lostAt := make(chan time.Time, 1)
				a := ra.NewHolder(func() { lostAt <- time.Now() })
				acquireWhenFree(t, a, "db-slots", 3, 4, 3*lease) // the new store's first lease
				b := rb.NewHolder(nil)
				wantErr(t, "b while a holds", b.Acquire(bg(), []byte("db-slots"), 3, 4), resource.ErrNotAvailable)

				lostAt0 := time.Now()
				switch loss {
				case "restart":
					redistest.RestartServer(t, tg.Addr)
				case "flushall":
					if err := tg.Client.FlushAll(bg()).Err(); err != nil {
						t.Fatal(err)
					}
				}
				grantedAt, refused := acquireWhenFree(t, b, "db-slots", 3, 4, 3*lease)
				var lost time.Time
				select {
				case lost = <-lostAt:
				default:
					t.Fatal("a's holder was never told it lost its holdings")
				}
				t.Logf("a closed %v after the loss, b granted %v after", lost.Sub(lostAt0), grantedAt.Sub(lostAt0))
				if !refused || !lost.Before(grantedAt) {
					t.Fatalf("b granted %v after the loss (refused first: %v), a's holder given up %v after: overlap",
						grantedAt.Sub(lostAt0), refused, lost.Sub(lostAt0))
				}
				if grantedAt.Sub(lostAt0) < lease {
					t.Fatalf("b granted %v after the loss, before a lease (%v)", grantedAt.Sub(lostAt0), lease)
				}
				if lost.Sub(lostAt0) > lease {
					t.Fatalf("a's holder given up %v after the loss: want at a renewal, within the lease", lost.Sub(lostAt0))
				}
				a.ReleaseAll(bg())
			})
		})
	}
}

// TestRedisBirthKeys: a store writes at its start the birth of every slot
// (of the one server), in a key of each slot (see TestRedisOneSlotPerName
// for the slot of a counter's birth); a second start keeps them.
func TestRedisBirthKeys(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		rdb := tg.NoRetryClient(t, "")
		t.Cleanup(func() { // they have no expiry
			keys := redistest.Keys(t, tg.Client, prefix)
			tg.Client.Pipelined(bg(), func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Del(bg(), k)
				}
				return nil
			})
		})
		openNew(t, rdb, prefix, 0, zerolog.Nop())
		keys := redistest.Keys(t, tg.Client, prefix)
		want := 1
		if tg.Kind == redistest.Cluster {
			want = 16384
			slots := map[int64]bool{}
			for _, k := range keys {
				s, err := tg.Client.ClusterKeySlot(bg(), k).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots[s] = true
			}
			if len(slots) != want {
				t.Fatalf("birth keys in %d slots, want every one", len(slots))
			}
		}
		if len(keys) != want {
			t.Fatalf("%d keys after the first start, want %d births", len(keys), want)
		}
		before, err := tg.Client.Get(bg(), keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Redis's clock moves on past the first start's millisecond, so a
		// rewritten birth would differ.
		started, err := tg.Client.Time(bg()).Result()
		if err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 5*time.Second, "Redis's clock moves on", func() bool {
			now, err := tg.Client.Time(bg()).Result()
			return err == nil && now.UnixMilli() > started.UnixMilli()
		})
		openNew(t, rdb, prefix, 0, zerolog.Nop())
		if after, err := tg.Client.Get(bg(), keys[0]).Result(); err != nil || after != before {
			t.Fatalf("a second start rewrote the birth %s: %s, %v", before, after, err)
		}
	}, redistest.Real, redistest.Cluster)
}

// TestRedisScriptFlushRelease: after SCRIPT FLUSH, ending a holder still
// releases its holdings (the scripts are sent again), and nothing says
// they were not released.
func TestRedisScriptFlushRelease(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	log := &syncbuf.Buffer{}
	r, err := resource.NewRedis(bg(), tg.Client, resource.RedisOptions{
		Prefix: redistest.Prefix(t), Logger: zerolog.New(log), AssumeNoHolders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.NewHolder(nil)
	for _, n := range []string{"a", "b", "c"} {
		wantErr(t, "acquire "+n, h.Acquire(bg(), []byte(n), 1, 1), nil)
	}
	if err := tg.Client.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	h.ReleaseAll(bg())
	for _, n := range []string{"a", "b", "c"} {
		if got := redisGet(t, r, n); got != 0 {
			t.Fatalf("%s after ReleaseAll = %d", n, got)
		}
	}
	if s := log.String(); strings.Contains(s, "not released") {
		t.Fatalf("the log says holdings were not released: %s", s)
	}
}
