package window

import (
	"context"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vkcounter/vkcounter/counters/internal/expiry"
	"github.com/vkcounter/vkcounter/counters/memcap"
)

// MemoryLimits cap a memory store: the counters it holds (each name and
// window) and their estimated bytes, runs included. Zero fields mean the
// defaults (memcap.DefaultMaxNames, memcap.DefaultMaxBytes).
type MemoryLimits = memcap.Limits

// Memory is a Store in this process. The zero value is not usable; call
// NewMemory. It is safe for concurrent use.
//
// Like the Redis store it keeps, per counter, one entry per distinct
// second (a run length) and the running total, so a counter costs at most
// one entry per second of its window. A counter whose window has passed
// is dropped a few at a time as calls arrive, earliest first, so quiet
// counters do not pile up and no call sweeps them all.
//
// The store stays within its MemoryLimits: past them a new counter is
// refused with ErrNoMemory, and so is a hit that needs a new run (a new
// second) once the bytes cap is reached; other hits and every Count keep
// working.
type Memory struct {
	clock func() time.Time

	mu sync.Mutex
	// counters, expiring, budget and the series are guarded by mu.
	counters map[counterKey]*series
	// expiring holds every counter by the second its newest run leaves
	// its window.
	expiring expiry.Queue[*series]
	budget   *memcap.Budget
}

type counterKey struct {
	name string
	secs int64
}

// dropPerCall is the most counters whose window has passed that one call
// drops: a bounded cost per call that still drops them faster than calls
// can create them.
const dropPerCall = 16

// NewMemory returns an empty store reading the time from clock (time.Now
// when nil), within lim.
func NewMemory(clock func() time.Time, lim MemoryLimits) *Memory {
	if clock == nil {
		clock = time.Now
	}
	return &Memory{clock: clock, counters: make(map[counterKey]*series), budget: memcap.NewBudget(lim, ErrNoMemory)}
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
	m.dropExpired(now)
	k := counterKey{name, secs}
	s := m.counters[k]
	if s == nil {
		cost := (&series{key: k}).bytes() + runsBytes(1)
		if err := m.budget.Admit(cost); err != nil {
			return 0, err
		}
		k.name = strings.Clone(name) // not the request it was cut from
		s = &series{key: k}
		m.counters[k] = s
		m.budget.Add(1, s.bytes())
	}
	before := s.bytes()
	prev, err := s.hit(now, secs, m.budget)
	m.budget.Add(0, s.bytes()-before)
	if err != nil {
		if s.total == 0 { // a new counter, or one that had emptied
			m.expiring.Remove(s)
			m.drop(s)
		}
		return 0, err
	}
	m.expiring.Set(s, s.runs[len(s.runs)-1].sec+secs)
	return prev, nil
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
	m.dropExpired(now)
	s := m.counters[counterKey{name, secs}]
	if s == nil {
		return 0, nil
	}
	before := s.bytes()
	n := s.trim(now, secs)
	m.budget.Add(0, s.bytes()-before)
	if n == 0 {
		m.expiring.Remove(s)
		m.drop(s)
	}
	return n, nil
}

// dropExpired drops up to dropPerCall counters whose window has passed at
// now. m.mu is held.
func (m *Memory) dropExpired(now int64) {
	for range dropPerCall {
		s, ok := m.expiring.PopDue(now)
		if !ok {
			return
		}
		m.drop(s)
	}
}

// drop forgets s, taken out of m.expiring. m.mu is held.
func (m *Memory) drop(s *series) {
	delete(m.counters, s.key)
	m.budget.Add(-1, -s.bytes())
}

// Len returns the number of counters held, quiet ones not yet dropped
// included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.counters)
}

// Usage returns the number of counters held and their estimated bytes.
func (m *Memory) Usage() (counters int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.Names(), m.budget.Bytes()
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

// A series is one counter's hits: runs of (second, hits) oldest first,
// from runs[head] on, and their total. It is not safe for concurrent use.
type series struct {
	expiry.Entry
	key   counterKey
	runs  []run
	head  int
	total int64
}

type run struct{ sec, n int64 }

// seriesBytes is the estimated memory of a series beyond its name's copy
// and its runs: the struct, its slot in the counters map (a counterKey and
// a pointer) and in the expiry queue.
var seriesBytes = memcap.Alloc(int64(unsafe.Sizeof(series{}))) + memcap.MapEntry(int64(unsafe.Sizeof(counterKey{}))+8) + expiry.SlotBytes

// runsBytes is the estimated bytes of an array of n runs.
func runsBytes(n int) int64 { return memcap.Alloc(int64(n) * 16) }

// bytes is the estimated memory of s.
func (s *series) bytes() int64 {
	return seriesBytes + memcap.String(len(s.key.name)) + runsBytes(cap(s.runs))
}

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
	// Reclaim the dropped prefix once it is half the slice, and the
	// array once it is mostly empty.
	if s.head > 0 && s.head*2 >= len(s.runs) {
		live := len(s.runs) - s.head
		if live*4 < cap(s.runs) {
			s.runs = append(make([]run, 0, max(live*2, 1)), s.runs[s.head:]...)
		} else {
			s.runs = append(s.runs[:0], s.runs[s.head:]...)
		}
		s.head = 0
	}
	return s.total
}

// hit trims, records one hit at now (or at the newest second, if the clock
// is behind it) and returns the total before it. A hit that needs a new
// run when the array is full grows it (doubling) only if budget allows:
// else it returns ErrNoMemory, having only trimmed.
func (s *series) hit(now, secs int64, budget *memcap.Budget) (int64, error) {
	prev := s.trim(now, secs)
	if last := len(s.runs) - 1; last >= s.head && s.runs[last].sec >= now {
		s.runs[last].n++
	} else {
		if len(s.runs) == cap(s.runs) {
			c := max(2*cap(s.runs), 1)
			if err := budget.Fits(runsBytes(c) - runsBytes(cap(s.runs))); err != nil {
				return 0, err
			}
			s.runs = append(make([]run, 0, c), s.runs...)
		}
		s.runs = append(s.runs, run{sec: now, n: 1})
	}
	s.total++
	return prev, nil
}
