package freq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

// TestRecordConcurrent: messages recorded at once, each twice (its
// re-delivery racing it), go to Redis in shared pipelines (a cluster's
// split by node, two calls a message) and are still counted and queued
// once each: the answers are each of 0..n-1 once, each message's second
// call a duplicate with the first's answer, one reply per message with
// distinct random_ids.
func TestRecordConcurrent(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{})
		q := newQueue(t, s, 10_000)
		const n = 150
		got := together.Run(t, 2*n, func(i int) (freq.Recorded, error) {
			d := fmt.Sprint("m", i%n)
			return s.Record(context.Background(), &freq.Message{Text: "same", Dedupe: d, Queue: q, Data: d})
		})
		var firsts []int64
		for i := range n {
			a, b := got[i], got[i+n]
			if a.Duplicate == b.Duplicate || a.Previous != b.Previous {
				t.Fatalf("message m%d: %+v and %+v, want one counted and one duplicate with its answer", i, a, b)
			}
			firsts = append(firsts, a.Previous)
		}
		slices.Sort(firsts)
		for i, v := range firsts {
			if v != int64(i) {
				t.Fatalf("answers %v, want each of 0..%d once", firsts, n-1)
			}
		}
		texts, peers, ids := entries(t, tg, q)
		slices.Sort(peers)
		peers = slices.Compact(peers)
		slices.Sort(ids)
		if len(texts) != n || len(peers) != n || len(slices.Compact(ids)) != n {
			t.Fatalf("%d replies of %d messages with %d random_ids, want one each of %d", len(texts), len(peers), len(ids), n)
		}
	})
}

// TestRecordGivenUpInAStall: on a stalled Redis, a caller whose deadline
// passes gets its error and fails no other message of its pipeline; its
// message, sent again by VK, is counted once in all.
func TestRecordGivenUpInAStall(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		proxy := redistest.NewProxy(t, tg.Addr)
		prefix := redistest.Prefix(t)
		s := mustNew(t, tg.NoRetryClient(t, proxy.Addr()), freq.Options{Prefix: prefix})
		q := newQueue(t, s, 100)
		record := func(ctx context.Context, d string) (freq.Recorded, error) {
			return s.Record(ctx, &freq.Message{Text: "t", Dedupe: d, Queue: q, Data: d})
		}
		if _, err := record(ctx, "m0"); err != nil { // the pipeline's connection, made before the stall
			t.Fatal(err)
		}
		proxy.Stall()
		late := make(chan error, 1)
		go func() {
			_, err := record(ctx, "m1")
			late <- err
		}()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := record(short, "m2"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("m2 past its deadline in a stall: %v, want context.DeadlineExceeded", err)
		}
		proxy.Resume()
		if err := <-late; err != nil {
			t.Fatalf("m1, sent with m2 or before it: %v", err)
		}
		again, err := record(ctx, "m2") // VK's re-delivery
		if err != nil {
			t.Fatal(err)
		}
		r, err := record(ctx, "m3")
		if err != nil || r.Previous != 3 {
			t.Fatalf("m3 after m0, m1 and m2 (m2 %+v the second time): %+v, %v; want 3 earlier", again, r, err)
		}
		if texts, _, _ := entries(t, tg, q); len(texts) != 4 {
			t.Fatalf("replies %v, want one for each of 4 messages", texts)
		}
	}, redistest.Mini, redistest.Real)
}
