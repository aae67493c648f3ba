package resource

// A Holder is what one connection holds: how many resources of each counter
// it acquired and has not released. Release is checked against it, so a
// connection can only give back what it took, and ReleaseAll returns
// everything when the connection ends.
//
// A Holder is not safe for concurrent use: it belongs to the goroutine
// serving its connection. Its Table is shared.
type Holder struct {
	t *Table
	// held maps a counter name to what this holder holds of it; entries
	// are never 0. A counter this holder holds cannot be deleted by GC,
	// since its consumption is at least the holding.
	held map[string]uint32
}

// NewHolder returns a Holder that holds nothing.
func (t *Table) NewHolder() *Holder {
	return &Holder{t: t, held: make(map[string]uint32)}
}

// Acquire adds resources to the named counter, creating it, if the new
// consumption stays within maximum. The counter's maximum is not stored:
// each call checks its own. It fails with ErrInvalid for resources 0,
// maximum below resources or a bad name, ErrNotAvailable when the
// consumption would exceed maximum, and an error wrapping ErrNoMemory when
// the counter or the holding cannot be created (see Options.MaxMemory) or
// the holder holds Options.MaxHoldings names already; a failed Acquire
// changes nothing but, when the table is full, which counters at 0 it
// keeps.
func (h *Holder) Acquire(name []byte, resources, maximum uint32) error {
	if resources == 0 || maximum < resources || !validName(name) {
		return ErrInvalid
	}
	t := h.t
	if len(h.held) >= t.maxHeld && h.held[string(name)] == 0 {
		return tooManyHoldings(t.maxHeld)
	}
	// Memory is reserved with no shard lock held: making room takes the
	// locks of other shards.
	var reserved int64
	if h.held[string(name)] == 0 {
		if !t.reserve(holdingCost) {
			return ErrNoMemory
		}
		reserved = holdingCost
	}
	now := t.now()
	s := t.lock(name)
	c := s.m[string(name)]
	if c == nil {
		s.mu.Unlock()
		need := cost(len(name))
		if !t.reserve(need) {
			t.usedMemory.Add(-reserved)
			return ErrNoMemory
		}
		s = t.lock(name)
		if c = s.m[string(name)]; c == nil {
			c = t.create(s, name, now)
		} else {
			t.usedMemory.Add(-need) // created by another meanwhile
		}
	}
	t.unsetIdle(c)
	ok := c.acquire(resources, maximum, now, t.boundary(now))
	key := c.name
	s.mu.Unlock()
	if !ok {
		t.usedMemory.Add(-reserved)
		return ErrNotAvailable
	}
	// No overflow: the holding is at most the counter's consumption.
	h.held[key] += resources
	return nil
}

// Release gives back resources of the named counter. It fails with
// ErrNotFound if the counter does not exist, and with ErrNotAcquired if
// this holder holds none of it or fewer than resources (even when other
// holders hold more). Releasing 0 while holding some succeeds and counts as
// a touch for GC and the maximum consumption.
func (h *Holder) Release(name []byte, resources uint32) error {
	if !validName(name) {
		return ErrInvalid
	}
	t := h.t
	now := t.now()
	s := t.lock(name)
	c := s.m[string(name)]
	if c == nil {
		s.mu.Unlock()
		return ErrNotFound
	}
	held := h.held[c.name]
	if held == 0 || resources > held {
		s.mu.Unlock()
		return ErrNotAcquired
	}
	c.release(resources, now, t.boundary(now))
	if c.consumption == 0 {
		t.setIdle(c)
	}
	s.mu.Unlock()
	if held == resources {
		delete(h.held, c.name)
		t.usedMemory.Add(-holdingCost)
	} else {
		h.held[c.name] = held - resources
	}
	return nil
}

// Held returns how many resources of the named counter this holder holds.
func (h *Holder) Held(name string) uint32 { return h.held[name] }

// Len returns the number of counters this holder holds resources of.
func (h *Holder) Len() int { return len(h.held) }

// ReleaseAll gives back everything this holder holds, as releases, and
// leaves it empty.
func (h *Holder) ReleaseAll() {
	for name, n := range h.held {
		if err := h.Release([]byte(name), n); err != nil {
			// Unreachable: a held counter exists and holds at least n.
			panic("resource: releasing a holding failed: " + err.Error())
		}
	}
}
