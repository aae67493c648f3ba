package unique

import (
	"context"
	"strings"
	"sync"
	"unsafe"

	"github.com/vkcounter/vkcounter/counters/internal/hll"
	"github.com/vkcounter/vkcounter/counters/memcap"
)

// MemoryLimits cap a memory store: the names it holds and their estimated
// bytes, sketches included. Zero fields mean the defaults
// (memcap.DefaultMaxNames, memcap.DefaultMaxBytes).
type MemoryLimits = memcap.Limits

// Memory is a Store in this process: one HyperLogLog per name, sparse
// (4 bytes per register set) up to 4 KiB, then 16 KiB. Its estimates are
// those Redis gives for the same keys. The zero value is not usable; call
// NewMemory. It is safe for concurrent use. Counters never expire.
//
// The store stays within its MemoryLimits: past them an Add that would
// create a name is refused with ErrNoMemory, and so is one that may grow a
// name's sketch once the bytes cap is reached; other Adds and every Count
// keep working.
type Memory struct {
	mu       sync.Mutex // guards sketches, budget and the sketches themselves
	sketches map[string]*hll.Sketch
	budget   *memcap.Budget
}

// NewMemory returns an empty store within lim.
func NewMemory(lim MemoryLimits) *Memory {
	return &Memory{sketches: make(map[string]*hll.Sketch), budget: memcap.NewBudget(lim, ErrNoMemory)}
}

// sketchBytes is the estimated memory of a name's sketch beyond its
// registers and the name's copy: the Sketch and its slot in the sketches
// map (a string and a pointer).
var sketchBytes = memcap.Alloc(int64(unsafe.Sizeof(hll.Sketch{}))) + memcap.MapEntry(16+8)

// sketchMemory is the estimated memory of the sketch s of name.
func sketchMemory(name string, s *hll.Sketch) int64 {
	return sketchBytes + memcap.String(len(name)) + memcap.Alloc(int64(s.Size()))
}

// Add adds keys to name; see Store.
func (m *Memory) Add(ctx context.Context, name string, keys []string) (bool, error) {
	if err := checkAdd(name, keys); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sketches[name]
	if s == nil {
		s = new(hll.Sketch)
		if err := m.budget.Admit(sketchMemory(name, s) + int64(s.GrowthBound(len(keys)))); err != nil {
			return false, err
		}
		name = strings.Clone(name) // not the request it was cut from
		m.sketches[name] = s
		m.budget.Add(1, sketchMemory(name, s))
	} else if err := m.budget.Fits(int64(s.GrowthBound(len(keys)))); err != nil {
		return false, err
	}
	before := sketchMemory(name, s)
	changed := false
	for _, k := range keys {
		if s.AddString(k) {
			changed = true
		}
	}
	m.budget.Add(0, sketchMemory(name, s)-before)
	return changed, nil
}

// Count estimates the union of names; see Store.
func (m *Memory) Count(ctx context.Context, names ...string) (int64, error) {
	if err := checkCount(names); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(names) == 1 {
		s := m.sketches[names[0]]
		if s == nil {
			return 0, ErrNotFound
		}
		return int64(s.Estimate()), nil
	}
	var regs [hll.Registers]uint8
	found := false
	for _, n := range names {
		if s := m.sketches[n]; s != nil {
			s.MergeInto(&regs)
			found = true
		}
	}
	if !found {
		return 0, ErrNotFound
	}
	return int64(hll.Estimate(&regs)), nil
}

// Usage returns the number of names held and their estimated bytes.
func (m *Memory) Usage() (names int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.Names(), m.budget.Bytes()
}
