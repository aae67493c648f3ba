package unique

import (
	"context"
	"sync"

	"github.com/vkcounter/vkcounter/counters/internal/hll"
)

// Memory is a Store in this process: one HyperLogLog per name, sparse
// (4 bytes per register set) up to 4 KiB, then 16 KiB. Its estimates are
// those Redis gives for the same keys. The zero value is not usable; call
// NewMemory. It is safe for concurrent use. Counters never expire.
type Memory struct {
	mu       sync.Mutex // guards sketches and the sketches themselves
	sketches map[string]*hll.Sketch
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{sketches: make(map[string]*hll.Sketch)} }

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
		m.sketches[name] = s
	}
	changed := false
	for _, k := range keys {
		if s.AddString(k) {
			changed = true
		}
	}
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
