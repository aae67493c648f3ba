// Package toptexts keeps, in memory, the N keys with the highest counts
// seen within a sliding window: a bounded heavy-hitters table fed with
// exact counts (each observation is the key's count in the window as some
// authority, here Redis, answered it), so it keeps no error term.
//
// An observation of a key already kept updates its count; a new key takes
// a free place, else the place of the kept key with the lowest count if
// its own count is higher (the Space-Saving replacement, with counts that
// need no estimate). A key not observed for a whole window is dropped: its
// count is no longer known. Memory is bounded by N and MaxKeyBytes: a key
// is kept by a 128-bit digest of it, and at most its first MaxKeyBytes
// bytes are kept to be shown.
//
// Use New, Observe for every count, and Top to read.
package toptexts

import (
	"cmp"
	"container/heap"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxN is the most keys a Table may keep.
const MaxN = 1000

// MaxKeyBytes is the most bytes of a key a Table keeps to show it; a
// longer key is cut on a UTF-8 boundary and marked Cut.
const MaxKeyBytes = 512

// sweepEvery is the least time between two sweeps of the keys not
// observed for a window, made when a new key finds the table full.
const sweepEvery = time.Second

// An Entry is one kept key.
type Entry struct {
	Key   string    // the key, or its first MaxKeyBytes bytes when Cut
	Cut   bool      // Key is the start of a longer key
	Count int64     // the count last observed
	Seen  time.Time // when it was last observed
}

// A Table is the kept keys. It is safe for concurrent use.
type Table struct {
	n      int
	window time.Duration

	mu        sync.Mutex // guards the fields below
	byDigest  map[digest]*slot
	heap      slotHeap // lowest count first
	lastSweep time.Time
}

type digest [16]byte

type slot struct {
	Entry
	digest digest
	index  int // in heap
}

// New returns a Table keeping the n keys with the highest counts, each for
// window after it was last observed. n is 1 to MaxN; window > 0.
func New(n int, window time.Duration) (*Table, error) {
	switch {
	case n < 1 || n > MaxN:
		return nil, fmt.Errorf("toptexts: n must be 1 to %d, got %d", MaxN, n)
	case window <= 0:
		return nil, errors.New("toptexts: window must be positive")
	}
	return &Table{n: n, window: window, byDigest: make(map[digest]*slot, n), heap: make(slotHeap, 0, n)}, nil
}

// Observe records that key's count in the window was count at now.
func (t *Table) Observe(key string, count int64, now time.Time) {
	sum := sha256.Sum256([]byte(key))
	d := digest(sum[:16])
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byDigest[d]; ok {
		s.Count, s.Seen = count, now
		heap.Fix(&t.heap, s.index)
		return
	}
	if len(t.heap) == t.n && now.Sub(t.lastSweep) >= sweepEvery {
		t.sweep(now)
	}
	if len(t.heap) < t.n {
		s := &slot{Entry: shown(key, count, now), digest: d}
		t.byDigest[d] = s
		heap.Push(&t.heap, s)
		return
	}
	low := t.heap[0]
	if count <= low.Count {
		return
	}
	delete(t.byDigest, low.digest)
	low.Entry, low.digest = shown(key, count, now), d
	t.byDigest[d] = low
	heap.Fix(&t.heap, 0)
}

// sweep drops the keys not observed for a window.
func (t *Table) sweep(now time.Time) {
	t.lastSweep = now
	kept := t.heap[:0]
	for _, s := range t.heap {
		if now.Sub(s.Seen) < t.window {
			s.index = len(kept)
			kept = append(kept, s)
		} else {
			delete(t.byDigest, s.digest)
		}
	}
	clear(t.heap[len(kept):])
	t.heap = kept
	heap.Init(&t.heap)
}

// Top returns the kept keys observed within the window before now, the
// highest count first (then the latest observed).
func (t *Table) Top(now time.Time) []Entry {
	t.mu.Lock()
	out := make([]Entry, 0, len(t.heap))
	for _, s := range t.heap {
		if now.Sub(s.Seen) < t.window {
			out = append(out, s.Entry)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return b.Seen.Compare(a.Seen)
	})
	return out
}

// N is how many keys the table keeps at most.
func (t *Table) N() int { return t.n }

// shown is the entry of key as kept: at most MaxKeyBytes of it.
func shown(key string, count int64, now time.Time) Entry {
	e := Entry{Key: key, Count: count, Seen: now}
	if len(key) > MaxKeyBytes {
		cut := MaxKeyBytes
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		// A copy: a slice of key would keep all of it alive.
		e.Key, e.Cut = strings.Clone(key[:cut]), true
	}
	return e
}

// slotHeap is a min-heap of slots by count (container/heap).
type slotHeap []*slot

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].Count < h[j].Count }
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *slotHeap) Push(x any) {
	s := x.(*slot)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *slotHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}
