package resource_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

const maxmemory = 32 << 20

// fill writes 64 KiB values to rdb under prefix until used_memory passes
// upTo; the keys are deleted when the test ends.
func fill(t *testing.T, rdb redis.UniversalClient, prefix string, upTo int64) {
	t.Helper()
	var keys []string
	t.Cleanup(func() {
		for _, k := range keys {
			rdb.Del(context.Background(), k)
		}
	})
	val := strings.Repeat("x", 64<<10)
	for i := 0; usedMemory(t, rdb) <= upTo; i++ {
		if i == 10000 {
			t.Fatalf("used_memory not past %d after 10000 values of 64 KiB", upTo)
		}
		k := prefix + "filler:" + strconv.Itoa(i)
		if err := rdb.Set(bg(), k, val, 0).Err(); err != nil {
			t.Fatalf("filling Redis: %v", err)
		}
		keys = append(keys, k)
	}
}

func usedMemory(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.InfoMap(bg(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	return n
}

// TestRedisReleasesAtMaxmemory: on a real Redis past maxmemory
// (noeviction, every write that may take memory refused with OOM), a partial release, a whole release and the
// releases of a closed connection (ReleaseAll) all succeed, and so do
// renewals; a new acquire is refused whole.
func TestRedisReleasesAtMaxmemory(t *testing.T) {
	t.Parallel() // waits three leases, on a server of its own
	tg := redistest.OwnServer(t)
	prefix := redistest.Prefix(t)
	r, err := resource.NewRedis(bg(), tg.Client, resource.RedisOptions{Prefix: prefix, Lease: 2 * time.Second, Logger: zerolog.Nop(), AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lost := make(chan struct{}, 1)
	h := r.NewHolder(func() { lost <- struct{}{} })
	for _, name := range []string{"a", "b", "c", "d"} {
		wantErr(t, "acquire "+name, h.Acquire(bg(), []byte(name), 3, 10), nil)
	}
	redistest.PastMaxmemory(t, tg.Client)
	if err := tg.Client.Set(bg(), prefix+"more", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a write at maxmemory: %v, want OOM", err)
	}
	h2 := r.NewHolder(nil)
	if err := h2.Acquire(bg(), []byte("new"), 1, 10); err == nil {
		t.Fatal("a new counter at maxmemory was acquired")
	}
	wantErr(t, "release 1 of a (partial)", h.Release(bg(), []byte("a"), 1), nil)
	wantErr(t, "release 3 of b (whole)", h.Release(bg(), []byte("b"), 3), nil)
	if got := redisGet(t, r, "a"); got != 2 {
		t.Fatalf("a after the partial release: %d, want 2", got)
	}
	if got := redisGet(t, r, "b"); got != 0 {
		t.Fatalf("b after the release: %d, want 0", got)
	}
	// Three leases pass at maxmemory (Redis's TIME, which no test clock
	// moves): the renewals keep c and d in Redis, and the holder is not
	// told it lost them.
	time.Sleep(3 * 2 * time.Second)
	select {
	case <-lost:
		t.Fatal("the holder lost its holdings at maxmemory: renewals were refused")
	default:
	}
	if got := redisGet(t, r, "c"); got != 3 {
		t.Fatalf("c after three leases at maxmemory: %d, want 3 (renewed)", got)
	}
	h.ReleaseAll(bg())
	for _, name := range []string{"a", "c", "d"} {
		if got := redisGet(t, r, name); got != 0 {
			t.Errorf("%s after the connection closed at maxmemory: %d, want 0", name, got)
		}
	}
}

// TestRedisNewHoldingPastHeadroom: past the headroom (20 % of 32 MiB), a
// new holding of a counter that exists is refused with ErrNoMemory as a
// new counter is, while a holding that exists still grows and releases.
func TestRedisNewHoldingPastHeadroom(t *testing.T) {
	tg := redistest.OwnServer(t, "--maxmemory", strconv.Itoa(maxmemory), "--maxmemory-policy", "noeviction")
	prefix := redistest.Prefix(t)
	guard, err := headroom.New(tg.Client, headroom.Options{Percent: 20, Every: 10 * time.Millisecond, Setting: "COUNTERS_REDIS_HEADROOM"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := resource.NewRedis(bg(), tg.Client, resource.RedisOptions{Prefix: prefix, Logger: zerolog.Nop(), AssumeNoHolders: true, Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, b := r.NewHolder(nil), r.NewHolder(nil)
	wantErr(t, "acquire x", a.Acquire(bg(), []byte("x"), 1, 100), nil)
	fill(t, tg.Client, prefix, maxmemory*85/100)
	eventually.True(t, 10*time.Second, "a new holding of x refused", func() bool {
		err := b.Acquire(bg(), []byte("x"), 1, 100)
		if err != nil && !errors.Is(err, resource.ErrNoMemory) {
			t.Fatalf("a new holding past the headroom: %v, want ErrNoMemory", err)
		}
		if err == nil {
			wantErr(t, "release it", b.Release(bg(), []byte("x"), 1), nil)
		}
		return err != nil
	})
	wantErr(t, "the holding that exists grows", a.Acquire(bg(), []byte("x"), 1, 100), nil)
	wantErr(t, "and releases", a.Release(bg(), []byte("x"), 2), nil)
}

// TestRedisMaxHoldings: a holder holds at most MaxHoldings names; one
// more is refused with ErrNoMemory, changing nothing, within one
// pipelined batch too; more of a name held, or a name again after it was
// released, is accepted.
func TestRedisMaxHoldings(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		r, err := resource.NewRedis(bg(), tg.Client, resource.RedisOptions{Prefix: redistest.Prefix(t), Logger: zerolog.Nop(), AssumeNoHolders: true, MaxHoldings: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h := r.NewHolder(nil)
		var ops []resource.Op
		for i := range 4 {
			ops = append(ops, resource.Op{Kind: resource.OpAcquire, Name: []byte(fmt.Sprint("n", i)), Resources: 1, Maximum: 5})
		}
		res := h.Do(bg(), ops)
		for i, want := range []error{nil, nil, nil, resource.ErrNoMemory} {
			if !errors.Is(res[i].Err, want) || (want == nil) != (res[i].Err == nil) {
				t.Fatalf("acquire n%d: %v, want %v", i, res[i].Err, want)
			}
		}
		if _, err := r.Get(bg(), []byte("n3")); !errors.Is(err, resource.ErrNotFound) {
			t.Fatalf("n3 refused, but Get says %v, want ErrNotFound", err)
		}
		wantErr(t, "more of a name held", h.Acquire(bg(), []byte("n0"), 1, 5), nil)
		wantErr(t, "release n1", h.Release(bg(), []byte("n1"), 1), nil)
		wantErr(t, "n3 once n1 is released", h.Acquire(bg(), []byte("n3"), 1, 5), nil)
	})
}
