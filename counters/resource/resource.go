// Package resource is the table of resource counters behind the yrmcds
// counter protocol: named counters whose consumption clients Acquire up to a
// maximum and Release again.
//
// A Table holds the counters and is safe for concurrent use. Each connection
// gets a Holder, which remembers how much of each counter that connection
// holds, enforces the per-connection release rules, and gives everything
// back with ReleaseAll when the connection ends.
//
// Time is cut into epoch-aligned statistics intervals (multiples of
// Options.Interval since the Unix epoch). A counter's maximum consumption
// covers the current interval only, and GC deletes a counter whose
// consumption is 0 and that was not acquired or released since the current
// interval began. When the table is full (Options.MaxMemory), counters at 0
// are deleted before that to make room, those released longest ago first.
package resource

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The errors of Acquire, Release and Get. Each is answered with its own
// protocol status.
var (
	// ErrInvalid: resources is 0, maximum is below resources, or the
	// name is empty or longer than MaxNameLen.
	ErrInvalid = errors.New("resource: invalid arguments")
	// ErrNotFound: no counter has that name.
	ErrNotFound = errors.New("resource: counter not found")
	// ErrNotAvailable: the acquire would take the consumption over the
	// maximum (or past 2^32-1).
	ErrNotAvailable = errors.New("resource: not available")
	// ErrNotAcquired: the holder does not hold that many resources of the
	// counter.
	ErrNotAcquired = errors.New("resource: not acquired")
	// ErrNoMemory: creating the counter, or the holder's holding of it,
	// would take the table's estimated memory over Options.MaxMemory, even
	// with every counter at 0 deleted (or Redis past its headroom); or the
	// holder holds the most names allowed already (Options.MaxHoldings,
	// RedisOptions.MaxHoldings).
	ErrNoMemory = errors.New("resource: out of memory")
)

// tooManyHoldings is the error of an acquire of one more name by a holder
// that holds most names already.
func tooManyHoldings(most int) error {
	return fmt.Errorf("%w: this connection holds %d names already, the most allowed", ErrNoMemory, most)
}

// Defaults and limits of Options.
const (
	// DefaultBuckets is the default Options.Buckets, as in yrmcds.
	DefaultBuckets = 1_000_000
	// DefaultInterval is the default statistics interval.
	DefaultInterval = 24 * time.Hour
	// MinInterval is the shortest statistics interval allowed.
	MinInterval = 10 * time.Second
	// DefaultMaxMemory is the default Options.MaxMemory: 1 GiB.
	DefaultMaxMemory = 1 << 30
	// MaxNameLen is the longest counter name.
	MaxNameLen = 1<<16 - 1

	// bucketsPerShard is how many of Options.Buckets share one lock.
	bucketsPerShard = 4096
	// maxShards bounds the number of locks.
	maxShards = 1024
	// counterOverhead estimates the bytes one counter costs besides its
	// name: the counter struct (48) and its entry in its shard's map (a
	// string header and a pointer: 24 bytes a slot, 29 to 57 a counter as
	// the map fills and grows), with the runtime's own overhead (about
	// 10 % of the heap for small objects). Measured by
	// TestTableMemoryEstimate.
	counterOverhead = 104
	// holdingCost estimates the bytes one holding costs: its entry in the
	// holder's map (a string header, sharing the counter's name, and a
	// count), as above.
	holdingCost = 48
	// reclaimTries bounds how often reclaim looks again for a counter to
	// delete when the one it found changed meanwhile.
	reclaimTries = 8
	// maxReclaims bounds the counters one acquire deletes to make room
	// (a long name may need many short ones' room).
	maxReclaims = 1 << 16
)

// Options configure a Table. Zero fields mean the documented defaults.
type Options struct {
	// Buckets is the expected number of counters, as counter.buckets in
	// yrmcds (default DefaultBuckets). It sets how many locks the table is
	// split into, one per 4096 buckets, between 1 and 1024; the table itself
	// grows as needed, so it bounds contention, not capacity.
	Buckets int
	// Interval is the statistics interval: whole seconds, at least
	// MinInterval (default DefaultInterval).
	Interval time.Duration
	// MaxMemory caps the table's estimated memory in bytes: each counter's
	// name (as allocated), struct and map entry, and each holding's map
	// entry, which is what they cost in the Go heap once garbage is
	// collected. An Acquire that would create a counter or a holding past
	// it first deletes counters at 0, released longest ago first, and fails
	// with ErrNoMemory when that does not make room. Default
	// DefaultMaxMemory.
	MaxMemory int64
	// MaxHoldings is the most names one holder (one connection) holds at
	// once: an Acquire of one more fails with ErrNoMemory and changes
	// nothing. Zero means DefaultMaxHoldings.
	MaxHoldings int
	// Clock tells the time (default time.Now). Only whole seconds matter.
	Clock func() time.Time
}

// A Table holds the resource counters. It is safe for concurrent use.
type Table struct {
	shards   []shard
	mask     uint64
	seed     maphash.Seed
	interval int64 // seconds
	maxMem   int64
	maxHeld  int // names one holder may hold (Options.MaxHoldings)
	clock    func() time.Time

	objects      atomic.Int64
	totalObjects atomic.Uint64
	usedMemory   atomic.Int64
	conflicts    atomic.Uint64
	reclaimed    atomic.Uint64
	gcCount      atomic.Uint64
	lastGC       atomic.Int64 // microseconds
	totalGC      atomic.Int64 // microseconds

	// idleMu guards idle and the links of the counters in it. Lock order:
	// a shard's mu, then idleMu.
	idleMu sync.Mutex
	// idle is the sentinel of a ring of the counters at 0, in the order
	// they fell to 0: the next to reclaim is idle.next.
	idle counter
	// idleMemory is the estimated memory of the counters in idle.
	idleMemory atomic.Int64
}

// A shard is one lock and the counters whose names hash to it.
type shard struct {
	mu sync.Mutex
	// m is guarded by mu.
	m map[string]*counter
	_ [40]byte // keep neighbouring locks off one cache line
}

// A counter is one named counter. Its fields are guarded by its shard's
// mu, but for prev and next.
type counter struct {
	name           string
	consumption    uint32
	maxConsumption uint32
	// lastUpdated is the Unix second of the last acquire or release.
	lastUpdated int64
	// prev and next link the counter into Table.idle while its
	// consumption is 0 (next is nil otherwise). Guarded by Table.idleMu.
	prev, next *counter
}

// New returns an empty Table, or an error if opts is invalid.
func New(opts Options) (*Table, error) {
	if opts.Buckets < 0 {
		return nil, fmt.Errorf("resource: buckets %d: must not be negative", opts.Buckets)
	}
	if opts.Buckets == 0 {
		opts.Buckets = DefaultBuckets
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Interval < MinInterval || opts.Interval%time.Second != 0 {
		return nil, fmt.Errorf("resource: interval %v: must be whole seconds, at least %v", opts.Interval, MinInterval)
	}
	if opts.MaxMemory < 0 {
		return nil, fmt.Errorf("resource: max memory %d: must not be negative", opts.MaxMemory)
	}
	if opts.MaxMemory == 0 {
		opts.MaxMemory = DefaultMaxMemory
	}
	switch {
	case opts.MaxHoldings < 0:
		return nil, fmt.Errorf("resource: max holdings %d: must not be negative", opts.MaxHoldings)
	case opts.MaxHoldings == 0:
		opts.MaxHoldings = DefaultMaxHoldings
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	n := 1
	for n < maxShards && n*bucketsPerShard < opts.Buckets {
		n *= 2
	}
	t := &Table{
		shards:   make([]shard, n),
		mask:     uint64(n - 1),
		seed:     maphash.MakeSeed(),
		interval: int64(opts.Interval / time.Second),
		maxMem:   opts.MaxMemory,
		maxHeld:  opts.MaxHoldings,
		clock:    opts.Clock,
	}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*counter)
	}
	t.idle.prev, t.idle.next = &t.idle, &t.idle
	return t, nil
}

// setIdle puts c, whose consumption just fell to 0, at the end of the
// idle ring. The caller holds c's shard lock.
func (t *Table) setIdle(c *counter) {
	t.idleMu.Lock()
	c.prev, c.next = t.idle.prev, &t.idle
	c.prev.next, t.idle.prev = c, c
	t.idleMu.Unlock()
	t.idleMemory.Add(cost(len(c.name)))
}

// unsetIdle takes c, which is about to be used or deleted, out of the idle
// ring if it is in it. The caller holds c's shard lock.
func (t *Table) unsetIdle(c *counter) {
	if c.consumption != 0 {
		return // only counters at 0 are in the ring
	}
	t.idleMu.Lock()
	in := c.next != nil
	if in {
		c.prev.next, c.next.prev = c.next, c.prev
		c.prev, c.next = nil, nil
	}
	t.idleMu.Unlock()
	if in {
		t.idleMemory.Add(-cost(len(c.name)))
	}
}

// reclaim deletes the counter at 0 that fell to 0 longest ago, and reports
// whether there was one. The caller holds no shard lock.
func (t *Table) reclaim() bool {
	for range reclaimTries {
		t.idleMu.Lock()
		c := t.idle.next
		if c == &t.idle {
			t.idleMu.Unlock()
			return false
		}
		name := c.name // set at creation, never changed
		t.idleMu.Unlock()
		s := t.lock([]byte(name))
		// Between the two locks c may have been acquired (it left the
		// ring) or deleted: then look again.
		if s.m[name] == c && c.consumption == 0 {
			t.unsetIdle(c)
			delete(s.m, name)
			t.forget(c)
			s.mu.Unlock()
			t.reclaimed.Add(1)
			return true
		}
		s.mu.Unlock()
	}
	return false
}

// reserve adds n bytes to the table's estimated memory, deleting counters
// at 0 to make room, or reports that it cannot; it deletes none when
// deleting them all would not make room. The caller holds no shard lock.
func (t *Table) reserve(n int64) bool {
	for range maxReclaims {
		if t.usedMemory.Add(n) <= t.maxMem {
			return true
		}
		t.usedMemory.Add(-n)
		if t.usedMemory.Load()-t.idleMemory.Load()+n > t.maxMem || !t.reclaim() {
			return false
		}
	}
	return false
}

// lock locks and returns the shard of name, counting a conflict when
// another goroutine holds it.
func (t *Table) lock(name []byte) *shard {
	s := &t.shards[maphash.Bytes(t.seed, name)&t.mask]
	if !s.mu.TryLock() {
		t.conflicts.Add(1)
		s.mu.Lock()
	}
	return s
}

// now returns the current Unix second.
func (t *Table) now() int64 { return t.clock().Unix() }

// boundary returns the start of the interval holding the Unix second sec.
func (t *Table) boundary(sec int64) int64 {
	b := sec - sec%t.interval
	if sec < 0 && sec%t.interval != 0 {
		b -= t.interval
	}
	return b
}

// NextBoundary returns the start of the statistics interval after the one
// holding now.
func (t *Table) NextBoundary(now time.Time) time.Time {
	return time.Unix(t.boundary(now.Unix())+t.interval, 0)
}

// validName reports whether name is a valid counter name: 1 to MaxNameLen
// bytes. It is the one name rule of both stores (Table and Redis).
func validName(name []byte) bool { return len(name) > 0 && len(name) <= MaxNameLen }

// Interval returns the statistics interval.
func (t *Table) Interval() time.Duration { return time.Duration(t.interval) * time.Second }

// Get returns the current consumption of the named counter, or ErrNotFound
// (ErrInvalid for a name no counter can have). It does not count as a touch
// for GC.
func (t *Table) Get(name []byte) (uint32, error) {
	if !validName(name) {
		return 0, ErrInvalid
	}
	s := t.lock(name)
	defer s.mu.Unlock()
	c := s.m[string(name)]
	if c == nil {
		return 0, ErrNotFound
	}
	return c.consumption, nil
}

// acquire adds resources to c if that keeps its consumption within maximum.
// The sum is taken in 64 bits, so it can never wrap.
func (c *counter) acquire(resources, maximum uint32, now, boundary int64) bool {
	sum := uint64(c.consumption) + uint64(resources)
	if sum > uint64(maximum) {
		return false
	}
	if c.lastUpdated < boundary {
		c.maxConsumption = uint32(sum)
	} else {
		c.maxConsumption = max(c.maxConsumption, uint32(sum))
	}
	c.lastUpdated = now
	c.consumption = uint32(sum)
	return true
}

// release takes resources, which the caller checked against what it holds,
// out of c.
func (c *counter) release(resources uint32, now, boundary int64) {
	if c.lastUpdated < boundary {
		// First touch in this interval: the interval's maximum so far is
		// what was held when it began.
		c.maxConsumption = c.consumption
	}
	c.lastUpdated = now
	c.consumption -= resources
}

// maxSince returns the maximum consumption of c in the interval starting at
// boundary.
func (c *counter) maxSince(boundary int64) uint32 {
	if c.lastUpdated < boundary {
		return c.consumption
	}
	return c.maxConsumption
}

// An Entry is a counter as Dump lists it.
type Entry struct {
	Name           string
	Consumption    uint32
	MaxConsumption uint32
}

// Dump calls fn for every counter, including those at 0 that GC has not
// removed yet, in no particular order. fn runs with no lock held, so it may
// do I/O; counters changed meanwhile may be listed with older values. Dump
// stops at and returns fn's first error. It holds one shard's lock at a
// time, while it copies that shard: a share of the table (1/256 with the
// default Options.Buckets), so never O(counters) under one lock (at the
// default cap, full of short names: 35,000 counters a shard, copied in
// 5–11 ms on two loaded cores).
func (t *Table) Dump(fn func(Entry) error) error {
	var batch []Entry
	for i := range t.shards {
		s := &t.shards[i]
		boundary := t.boundary(t.now())
		batch = batch[:0]
		s.mu.Lock()
		for _, c := range s.m {
			batch = append(batch, Entry{Name: c.name, Consumption: c.consumption, MaxConsumption: c.maxSince(boundary)})
		}
		s.mu.Unlock()
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// GC deletes every counter whose consumption is 0 and that was not acquired
// or released since the current interval began, and returns how many it
// deleted. The server runs it at start and just after each boundary.
func (t *Table) GC() int {
	start := time.Now()
	boundary := t.boundary(t.now())
	deleted := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for name, c := range s.m {
			if c.consumption == 0 && c.lastUpdated < boundary {
				t.unsetIdle(c)
				delete(s.m, name)
				t.forget(c)
				deleted++
			}
		}
		s.mu.Unlock()
	}
	elapsed := time.Since(start).Microseconds()
	t.gcCount.Add(1)
	t.lastGC.Store(elapsed)
	t.totalGC.Add(elapsed)
	return deleted
}

// cost estimates the memory of a counter whose name is nameLen bytes.
func cost(nameLen int) int64 { return allocSize(nameLen) + counterOverhead }

// allocSize estimates the bytes the Go heap gives an allocation of n
// bytes: n rounded up as its size classes do (to within 1/8, a step of an
// eighth of the power of two below n), and to whole 8 KiB pages past
// 32 KiB.
func allocSize(n int) int64 {
	const page = 8 << 10
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return 16
	case n > 32<<10:
		return int64((n + page - 1) / page * page)
	}
	step := max(16, 1<<(bits.Len(uint(n-1))-1)/8)
	return int64((n + step - 1) / step * step)
}

// create makes a counter for name in s (whose lock the caller holds) and
// its memory, reserved by the caller.
func (t *Table) create(s *shard, name []byte, now int64) *counter {
	ctr := &counter{name: string(name), lastUpdated: now}
	s.m[ctr.name] = ctr
	t.objects.Add(1)
	t.totalObjects.Add(1)
	return ctr
}

// forget updates the statistics for a deleted counter.
func (t *Table) forget(c *counter) {
	t.objects.Add(-1)
	t.usedMemory.Add(-cost(len(c.name)))
}

// Stats are the table's statistics.
type Stats struct {
	// Objects is the number of counters now.
	Objects int64
	// TotalObjects is the number of counters ever created.
	TotalObjects uint64
	// UsedMemory estimates the table's memory in bytes.
	UsedMemory int64
	// Conflicts counts lock acquisitions that had to wait for another
	// connection.
	Conflicts uint64
	// Reclaimed counts the counters at 0 deleted before their time to
	// make room in a full table.
	Reclaimed uint64
	// GCCount is the number of GC runs.
	GCCount uint64
	// LastGCElapsed and TotalGCElapsed are the wall time of the last GC
	// run and of all of them.
	LastGCElapsed  time.Duration
	TotalGCElapsed time.Duration
}

// Stats returns the table's statistics.
func (t *Table) Stats() Stats {
	return Stats{
		Objects:        t.objects.Load(),
		TotalObjects:   t.totalObjects.Load(),
		UsedMemory:     t.usedMemory.Load(),
		Conflicts:      t.conflicts.Load(),
		Reclaimed:      t.reclaimed.Load(),
		GCCount:        t.gcCount.Load(),
		LastGCElapsed:  time.Duration(t.lastGC.Load()) * time.Microsecond,
		TotalGCElapsed: time.Duration(t.totalGC.Load()) * time.Microsecond,
	}
}
