package access

import (
	"context"
	"slices"
	"sync"

	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// Memory is a Store that keeps its counters in this process. The zero
// value is not usable; call NewMemory. It is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex // guards totals and names
	totals map[string]int64
	names  []string // the names of totals in byte order, for List
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{totals: make(map[string]int64)}
}

// Add adds n (n >= 1) to the counter name and returns its new total.
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
		i, _ := slices.BinarySearch(m.names, name)
		m.names = slices.Insert(m.names, i, name)
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
