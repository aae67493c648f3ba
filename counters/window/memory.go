package window

import (
	"context"
	"sync"
	"time"
)

// Memory is a Store in this process. The zero value is not usable; call
// NewMemory. It is safe for concurrent use.
//
// Like the Redis store it keeps, per counter, one entry per distinct
// second (a run length) and the running total, so a counter costs at most
// one entry per second of its window. Counters whose window has passed are
// swept as hits arrive (the sweep's cost is spread over the hits), so
// quiet counters do not pile up.
type Memory struct {
	clock func() time.Time

	mu sync.Mutex
	// counters, hits and the series are guarded by mu.
	counters map[counterKey]*series
	// hits counts the hits since the last sweep.
	hits int
}

type counterKey struct {
	name string
	secs int64
}

// NewMemory returns an empty store reading the time from clock (time.Now
// when nil).
func NewMemory(clock func() time.Time) *Memory {
	if clock == nil {
		clock = time.Now
	}
	return &Memory{clock: clock, counters: make(map[counterKey]*series)}
}

// Hit records one hit; see Store.
func (m *Memory) Hit(ctx context.Context, name string, window time.Duration) (int64, error) {
	secs, err := check(name, window)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := m.clock().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hits++
	if m.hits >= len(m.counters) {
		m.sweep(now)
	}
	k := counterKey{name, secs}
	s := m.counters[k]
	if s == nil {
		s = &series{}
		m.counters[k] = s
	}
	return s.hit(now, secs), nil
}

// Count reads a counter; see Store.
func (m *Memory) Count(ctx context.Context, name string, window time.Duration) (int64, error) {
	secs, err := check(name, window)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := m.clock().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := counterKey{name, secs}
	s := m.counters[k]
	if s == nil {
		return 0, nil
	}
	n := s.trim(now, secs)
	if n == 0 {
		delete(m.counters, k)
	}
	return n, nil
}

// Len returns the number of counters held, quiet ones not yet swept
// included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.counters)
}

// Entries returns the number of run-length entries the counter (name,
// window) holds: at most one per second of its window.
func (m *Memory) Entries(name string, window time.Duration) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.counters[counterKey{name, int64(window / time.Second)}]
	if s == nil {
		return 0
	}
	return len(s.runs) - s.head
}

// sweep drops every counter with nothing inside its window. m.mu is held.
func (m *Memory) sweep(now int64) {
	m.hits = 0
	for k, s := range m.counters {
		if s.trim(now, k.secs) == 0 {
			delete(m.counters, k)
		}
	}
}

// A series is one counter's hits: runs of (second, hits) oldest first,
// from runs[head] on, and their total. It is not safe for concurrent use.
type series struct {
	runs  []run
	head  int
	total int64
}

type run struct{ sec, n int64 }

// trim drops the runs that left a window of secs seconds at now and returns
// the total left. A clock behind the newest run reads at its second.
func (s *series) trim(now, secs int64) int64 {
	if s.head < len(s.runs) {
		now = max(now, s.runs[len(s.runs)-1].sec)
	}
	cutoff := now - secs
	for s.head < len(s.runs) && s.runs[s.head].sec <= cutoff {
		s.total -= s.runs[s.head].n
		s.head++
	}
	// Reclaim the dropped prefix once it is half the slice.
	if s.head > 0 && s.head*2 >= len(s.runs) {
		s.runs = append(s.runs[:0], s.runs[s.head:]...)
		s.head = 0
	}
	return s.total
}

// hit trims, records one hit at now (or at the newest second, if the clock
// is behind it) and returns the total before it.
func (s *series) hit(now, secs int64) int64 {
	prev := s.trim(now, secs)
	if last := len(s.runs) - 1; last >= s.head && s.runs[last].sec >= now {
		s.runs[last].n++
	} else {
		s.runs = append(s.runs, run{sec: now, n: 1})
	}
	s.total++
	return prev
}
