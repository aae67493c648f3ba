package resource_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
)

// TestRedisDumpFloodKeepsLeasesSoak: 200 clients dump 20,000 counters over
// and over, through the instance that serves a holder, for twice its
// lease of 3 s. The holder's lease is renewed all along: the renewals do
// not wait behind the dumps, neither for a connection nor in Redis. A
// soak: a flood over leases of the machine's time (Redis's TIME).
func TestRedisDumpFloodKeepsLeasesSoak(t *testing.T) {
	soak.Test(t)
	tg := redistest.OwnServer(t)
	const (
		lease    = 3 * time.Second
		counters = 20_000
		dumpers  = 200
	)
	r := openRedis(t, tg.NoRetryClient(t, ""), redistest.Prefix(t), lease)
	// The counters, acquired and released: listed until the boundary.
	filler := r.NewHolder(nil)
	const perCall = 32
	ops := make([]resource.Op, 0, 2*perCall)
	for i := 0; i < counters; i += perCall {
		ops = ops[:0]
		for k := i; k < min(i+perCall, counters); k++ {
			name := []byte(fmt.Sprint("c", k))
			ops = append(ops, resource.Op{Kind: resource.OpAcquire, Name: name, Resources: 1, Maximum: 1},
				resource.Op{Kind: resource.OpRelease, Name: name, Resources: 1})
		}
		for _, res := range filler.Do(bg(), ops) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}

	var lost atomic.Bool
	h := r.NewHolder(func() { lost.Store(true) })
	wantErr(t, "acquire", h.Acquire(bg(), []byte("held"), 1, 1), nil)
	end := time.Now().Add(2 * lease)
	var wg sync.WaitGroup
	var whole, failed, listed atomic.Int64
	for range dumpers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && !lost.Load() {
				// As the counter port's COUNTERS_TIMEOUT would.
				ctx, cancel := context.WithDeadline(bg(), end)
				n := 0
				err := r.Dump(ctx, func(resource.Entry) error { n++; return nil })
				cancel()
				listed.Add(int64(n))
				if err == nil && n == counters+1 {
					whole.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d whole dumps of %d counters, %d cut by their deadline; %d counters listed in all",
		whole.Load(), counters+1, failed.Load(), listed.Load())
	if lost.Load() {
		t.Fatal("a dump flood made the instance give up a holder whose Redis was up")
	}
	if listed.Load() < counters {
		t.Fatalf("the dumps listed %d counters in all, not even one dump's worth", listed.Load())
	}
	wantErr(t, "release after the flood", h.Release(bg(), []byte("held"), 1), nil)
}
