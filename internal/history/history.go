// Package history keeps, in memory, how much running totals grew in each
// minute of the last hour: a fixed ring of the totals at the start of
// each minute, fed by a sampler (Observe) and read by whoever draws them
// (PerMinute). It costs nothing per event counted and reads nothing
// outside the process.
package history

import (
	"sync"
	"time"
)

// Minutes is how many whole minutes PerMinute returns: the last hour.
const Minutes = 60

// A Ring holds the totals of a fixed set of series at the start of each
// of the last Minutes+1 minutes. It is safe for concurrent use.
type Ring struct {
	mu     sync.Mutex
	series int
	// slot[i] holds the totals first observed in minute id[i] (unix
	// minutes); id 0 means empty.
	id   [Minutes + 1]int64
	slot [Minutes + 1][]int64
}

// New returns an empty Ring of series series.
func New(series int) *Ring {
	r := &Ring{series: series}
	for i := range r.slot {
		r.slot[i] = make([]int64, series)
	}
	return r
}

// minute is the unix minute of t.
func minute(t time.Time) int64 { return t.Unix() / 60 }

// Observe records totals (one per series, running totals that only grow
// while the process lives) as those of the start of now's minute, unless
// that minute already has its totals. A sampler calls it every few
// seconds, so each minute's start is known within that time.
func (r *Ring) Observe(now time.Time, totals []int64) {
	m := minute(now)
	i := m % int64(len(r.id))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id[i] == m {
		return
	}
	r.id[i] = m
	copy(r.slot[i], totals)
}

// PerMinute returns, for series s, how much its total grew in each of the
// last Minutes minutes up to now's, oldest first; the last one is the
// minute under way, measured up to live (the total now). A minute whose
// start or end is unknown (before the first Observe, or a gap in the
// sampling) is -1.
func (r *Ring) PerMinute(now time.Time, s int, live int64) []int64 {
	cur := minute(now)
	out := make([]int64, Minutes)
	r.mu.Lock()
	defer r.mu.Unlock()
	start := func(m int64) (int64, bool) {
		i := m % int64(len(r.id))
		if r.id[i] != m {
			return 0, false
		}
		return r.slot[i][s], true
	}
	for k := range Minutes {
		m := cur - int64(Minutes-1-k)
		from, ok := start(m)
		to, okTo := live, true
		if m != cur {
			to, okTo = start(m + 1)
		}
		if !ok || !okTo || to < from {
			out[k] = -1
			continue
		}
		out[k] = to - from
	}
	return out
}

// LastMinute returns how much series s grew in the last whole minute
// before now's (for a rate per second: divide by 60), and false when that
// minute is unknown.
func (r *Ring) LastMinute(now time.Time, s int) (int64, bool) {
	cur := minute(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	a, b := (cur-1)%int64(len(r.id)), cur%int64(len(r.id))
	if r.id[a] != cur-1 || r.id[b] != cur || r.slot[b][s] < r.slot[a][s] {
		return 0, false
	}
	return r.slot[b][s] - r.slot[a][s], true
}
