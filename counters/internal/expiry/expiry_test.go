package expiry_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vkcounter/vkcounter/counters/internal/expiry"
)

type item struct {
	expiry.Entry
	id int
}

// TestQueue sets, moves and removes items at random and checks that
// PopDue gives back exactly the items due, earliest first.
func TestQueue(t *testing.T) {
	var q expiry.Queue[*item]
	r := rand.New(rand.NewPCG(1, 2))
	items := make([]*item, 1000)
	at := map[int]int64{}
	for i := range items {
		items[i] = &item{id: i}
		at[i] = r.Int64N(100)
		q.Set(items[i], at[i])
	}
	for range 500 { // move some, remove some
		x := items[r.IntN(len(items))]
		if _, ok := at[x.id]; !ok {
			continue
		}
		if r.IntN(2) == 0 {
			at[x.id] = r.Int64N(100)
			q.Set(x, at[x.id])
		} else {
			q.Remove(x)
			q.Remove(x) // a second Remove does nothing
			delete(at, x.id)
		}
	}
	if q.Len() != len(at) {
		t.Fatalf("Len = %d; want %d", q.Len(), len(at))
	}
	for now := int64(0); now <= 100; now += 10 {
		var got []int64
		for {
			x, ok := q.PopDue(now)
			if !ok {
				break
			}
			if x.At() != at[x.id] || x.At() > now {
				t.Fatalf("PopDue(%d) gave item %d at %d; it was set to %d", now, x.id, x.At(), at[x.id])
			}
			delete(at, x.id)
			got = append(got, x.At())
		}
		if !slices.IsSorted(got) {
			t.Fatalf("PopDue(%d) out of order: %v", now, got)
		}
		for id, a := range at {
			if a <= now {
				t.Fatalf("item %d due at %d was not popped at %d", id, a, now)
			}
		}
	}
	if _, ok := q.PopDue(1 << 62); ok || q.Len() != 0 {
		t.Fatalf("items left after everything was due: %d", q.Len())
	}
}
