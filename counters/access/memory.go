package access

import (
	"context"
	"strings"
	"sync"

	"github.com/google/btree"

	"github.com/vkcounter/vkcounter/counters/internal/names"
	"github.com/vkcounter/vkcounter/counters/memcap"
)

// MemoryLimits cap a memory store: the names it holds and its estimated
// bytes. Zero fields mean the defaults (memcap.DefaultMaxNames names,
// memcap.DefaultMaxBytes bytes). Every kind's memory store takes the same
// limits, each for itself.
type MemoryLimits = memcap.Limits

// Memory is a Store that keeps its counters in this process, within its
// MemoryLimits: past them a new name is refused with ErrNoMemory, and the
// names that exist keep counting. The zero value is not usable; call
// NewMemory. It is safe for concurrent use.
//
// Creating a name is O(log n): the names are kept in byte order in a
// B-tree, for List, beside the map that Add and Total read in O(1).
type Memory struct {
	mu     sync.Mutex // guards totals, names and budget
	totals map[string]int64
	names  *btree.BTreeG[string] // the names of totals in byte order, for List
	budget *memcap.Budget
}

// btreeDegree is the degree of the names' B-tree: nodes of 31 to 63
// names, a few cache lines each.
const btreeDegree = 32

// entryBytes is the estimated memory of one counter beyond its name's
// copy: its slot in the totals map (a string and an int64) and in the
// B-tree (a string header, in nodes half full after names created in
// order to 70 % full after random ones: 28 to 40 bytes measured).
var entryBytes = memcap.MapEntry(16+8) + 34

// NewMemory returns an empty in-memory store within lim.
func NewMemory(lim MemoryLimits) *Memory {
	return &Memory{
		totals: make(map[string]int64),
		names:  btree.NewG(btreeDegree, func(a, b string) bool { return a < b }),
		budget: memcap.NewBudget(lim, ErrNoMemory),
	}
}

// nameBytes is the estimated memory of a counter named name.
func nameBytes(name string) int64 { return memcap.String(len(name)) + entryBytes }

// Add adds n (n >= 1) to the counter name and returns its new total. A new
// name past the store's limits is refused with ErrNoMemory.
func (m *Memory) Add(ctx context.Context, name string, n int64) (int64, error) {
	if err := checkAdd(name, n); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok := m.totals[name]
	next, err := addTotal(prev, n)
	if err != nil {
		return 0, err
	}
	if !ok {
		cost := nameBytes(name)
		if err := m.budget.Admit(cost); err != nil {
			return 0, err
		}
		m.budget.Add(1, cost)
		// A copy, so that the name does not keep alive the request it
		// was cut from; the map and the tree share it.
		name = strings.Clone(name)
		m.names.ReplaceOrInsert(name)
	}
	m.totals[name] = next
	return next, nil
}

// Total returns the counter's total, or ErrNotFound if it was never hit.
func (m *Memory) Total(ctx context.Context, name string) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	n, ok := m.totals[name]
	m.mu.Unlock()
	if !ok {
		return 0, ErrNotFound
	}
	return n, nil
}

// Usage returns the number of counters held and their estimated bytes.
func (m *Memory) Usage() (names int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.Names(), m.budget.Bytes()
}
