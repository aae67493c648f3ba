package participant

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vkcounter/vkcounter/counters/internal/expiry"
	"github.com/vkcounter/vkcounter/counters/memcap"
)

// MemoryLimits cap a memory store: the names it holds and their estimated
// bytes, keys included. Zero fields mean the defaults
// (memcap.DefaultMaxNames, memcap.DefaultMaxBytes).
type MemoryLimits = memcap.Limits

// Memory is a Store that keeps its sets in this process. The zero value
// is not usable; call NewMemory. It is safe for concurrent use.
//
// The store stays within its MemoryLimits. When a Visit needs room (a new
// name, or new keys of a name), it first drops names that no key can be
// active in any more (the longest timeout their visits gave has passed
// since the newest one), earliest first, a bounded number per call; if
// there is still no room it is refused with ErrNoMemory. Visits of keys a
// name holds, Leave and Active keep working. Names are dropped only for
// room, so that while there is room Active with a longer timeout than the
// visits' still counts their keys. With a cap on keys (SetMaxKeys), a
// Visit that would leave a name with more keys is refused with
// ErrTooManyKeys.
//
// Every call costs O(log n) in the keys of its name (a Visit, per key it
// carries): a name counts its keys by the second they were seen, so that
// Active need not walk the expired ones; a Visit drops the expired keys
// at once from the count and from memory a bounded number per call.
// Active locks only its name's set, not the store.
type Memory struct {
	clock func() time.Time
	cap   *KeyCap // nil: no cap on keys per name

	mu   sync.Mutex // guards sets, expiring, budget; a set changes only under mu and its own lock
	sets map[string]*set
	// expiring holds every set by the second from which no key of it is
	// active (with the longest timeout of its visits).
	expiring expiry.Queue[*set]
	budget   *memcap.Budget
}

// dropPerCall is the most expired sets one call drops to make room: a
// bounded cost per call, and more than a call can take.
const dropPerCall = 64

// removePerCall is the most expired keys of its name a Visit takes out of
// memory (they are out of every count at once).
const removePerCall = 1024

// NewMemory returns an empty in-memory store reading the time from clock
// (time.Now when nil), within lim.
func NewMemory(clock func() time.Time, lim MemoryLimits) *Memory {
	if clock == nil {
		clock = time.Now
	}
	return &Memory{clock: clock, sets: make(map[string]*set), budget: memcap.NewBudget(lim, ErrNoMemory)}
}

// SetMaxKeys caps the keys each name holds with c (nil: no cap). Call it
// before the store is used.
func (m *Memory) SetMaxKeys(c *KeyCap) { m.cap = c }

// VisitMany records every key of keys as seen now under name, under one
// lock; see Store.
func (m *Memory) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (int, int, error) {
	secs, err := checkVisitMany(name, keys, timeout, nil)
	if err != nil {
		return 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	now := m.clock().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sets[name]
	if s != nil && s.At() <= now {
		// No key of it is active: it is a new name, and not to be
		// dropped for room under its own visit.
		m.expiring.Remove(s)
		m.drop(s)
		s = nil
	}
	fresh := s == nil
	if fresh {
		s = newSet(name)
	} else {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	cut := max(s.cut, now-secs)
	if m.cap != nil {
		if after := s.sizeAfter(keys, cut); m.cap.over(after) {
			return 0, 0, m.cap.refused(name, after)
		}
	}
	if fresh {
		cost := s.bytes() + s.growth(keys)
		if err := m.makeRoom(now, func() error { return m.budget.Admit(cost) }); err != nil {
			return 0, 0, err
		}
		s.name = strings.Clone(name) // not the request it was cut from
		m.sets[s.name] = s
		m.budget.Add(1, s.bytes())
	} else {
		growth := s.growth(keys)
		if err := m.makeRoom(now, func() error { return m.budget.Fits(growth) }); err != nil {
			return 0, 0, err
		}
	}
	before := s.bytes()
	s.cut = cut
	added := 0
	for _, key := range keys {
		// A repeat of a key in keys finds it seen now: not new again.
		if s.visit(key, now) {
			added++
		}
	}
	s.removeExpired(removePerCall)
	m.budget.Add(0, s.bytes()-before)
	s.maxSecs = max(s.maxSecs, secs)
	m.expiring.Set(s, s.order.Back().Value.(*entry).seen+s.maxSecs+1)
	return s.count.since(s.cut), added, nil
}

// Leave forgets key under name; see Store.
func (m *Memory) Leave(ctx context.Context, name, key string) (int, bool, error) {
	if err := checkLeave(name, key); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sets[name]
	if s == nil {
		return 0, false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byKey[key]
	if ok {
		// A key a Visit dropped (seen before the cut) is no longer there.
		ok = el.Value.(*entry).seen >= s.cut
		before := s.bytes()
		s.remove(el)
		m.budget.Add(0, s.bytes()-before)
	}
	n := s.count.since(s.cut)
	if s.order.Len() == 0 {
		m.expiring.Remove(s)
		m.drop(s)
	}
	return n, ok, nil
}

// Active returns the number of keys under name seen within timeout. It
// locks the store only to find the name, and then the name's set alone.
func (m *Memory) Active(ctx context.Context, name string, timeout time.Duration) (int, error) {
	secs, err := checkActive(name, timeout)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := m.clock().Unix()
	m.mu.Lock()
	s := m.sets[name]
	m.mu.Unlock()
	if s == nil {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if testHookActive != nil {
		testHookActive(name)
	}
	// A set dropped meanwhile is counted as it was: the Active came first.
	return s.count.since(max(s.cut, now-secs)), nil
}

// testHookActive, when not nil, runs in Active while it holds the name's
// set (tests only).
var testHookActive func(name string)

// Usage returns the number of names held and their estimated bytes.
func (m *Memory) Usage() (names int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.budget.Names(), m.budget.Bytes()
}

// makeRoom returns nil once fits does, dropping up to dropPerCall sets
// that no key is active in at now, earliest first, while it does not; else
// it returns fits's error. m.mu is held.
func (m *Memory) makeRoom(now int64, fits func() error) error {
	for range dropPerCall {
		err := fits()
		if err == nil {
			return nil
		}
		s, ok := m.expiring.PopDue(now)
		if !ok {
			return err
		}
		m.drop(s)
	}
	return fits()
}

// drop forgets s, taken out of m.expiring. m.mu is held.
func (m *Memory) drop(s *set) {
	delete(m.sets, s.name)
	m.budget.Add(-1, -s.bytes())
}

// A set is one name's keys, ordered by last-seen time so that expired
// keys are found at the front, and counted by that second. It is not safe
// for concurrent use: its lock guards it, and it changes only while the
// store's lock is held too.
type set struct {
	expiry.Entry
	mu       sync.Mutex
	name     string
	byKey    map[string]*list.Element // of *entry
	order    *list.List               // of *entry, by seen ascending
	count    bySecond                 // the keys in order, by seen
	cut      int64                    // keys seen before it are dropped: counted by no call, and taken out of order a few per Visit
	keyBytes int64                    // the keys' copies, estimated
	maxSecs  int64                    // the longest timeout of its visits
}

type entry struct {
	key  string
	seen int64 // Unix seconds
}

// Estimated memory of a set: setBytes for the struct, its list, and its
// slots in the sets map (a string and a pointer) and the expiry queue;
// keyBytes per key for its list element, its entry and its slot in byKey,
// beside its copy (keyBytes) and the map's own size (memcap.Map); and the
// count by second (bySecond.bytes).
var (
	setBytes = memcap.Alloc(int64(unsafe.Sizeof(set{}))) + memcap.Alloc(int64(unsafe.Sizeof(list.List{}))) +
		memcap.MapEntry(16+8) + expiry.SlotBytes
	keyBytes = memcap.Alloc(int64(unsafe.Sizeof(list.Element{}))) + memcap.Alloc(int64(unsafe.Sizeof(entry{})))
)

func newSet(name string) *set {
	return &set{name: name, byKey: make(map[string]*list.Element), order: list.New()}
}

// bytes is the estimated memory of s.
func (s *set) bytes() int64 {
	return setBytes + memcap.String(len(s.name)) + s.size(s.order.Len(), s.keyBytes) + s.count.bytes()
}

// size is the estimated memory of n keys whose copies take kb bytes.
func (s *set) size(n int, kb int64) int64 {
	return memcap.Map(n, 16+8) + int64(n)*keyBytes + kb
}

// growth is the most s.bytes can rise by visiting keys: as if every key
// not held (repeats included) were added, in a new second.
func (s *set) growth(keys []string) int64 {
	n, kb := s.order.Len(), s.keyBytes
	for _, k := range keys {
		if _, ok := s.byKey[k]; !ok {
			n++
			kb += memcap.String(len(k))
		}
	}
	return s.size(n, kb) - s.size(s.order.Len(), s.keyBytes) + s.count.growth()
}

// sizeAfter is the number of keys s counts after a visit of keys that
// drops the keys seen before cut.
func (s *set) sizeAfter(keys []string, cut int64) int {
	n := s.count.since(cut)
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		if el, ok := s.byKey[k]; !ok || el.Value.(*entry).seen < cut {
			n++
		}
	}
	return n
}

// visit records key as seen at now and reports whether key was not
// active before (seen before s.cut, or not held).
func (s *set) visit(key string, now int64) (isNew bool) {
	isNew = true
	if el, ok := s.byKey[key]; ok {
		isNew = el.Value.(*entry).seen < s.cut
		key = el.Value.(*entry).key // keep the copy held
		s.remove(el)
	} else {
		key = strings.Clone(key)
	}
	// Keep the order sorted. With a clock that never goes back the new
	// entry belongs at the back and the loop does not run.
	e := &entry{key: key, seen: now}
	at := s.order.Back()
	for at != nil && at.Value.(*entry).seen > now {
		at = at.Prev()
	}
	if at == nil {
		s.byKey[key] = s.order.PushFront(e)
	} else {
		s.byKey[key] = s.order.InsertAfter(e, at)
	}
	s.count.add(now, 1)
	s.keyBytes += memcap.String(len(key))
	return isNew
}

// removeExpired takes up to n keys seen before s.cut out of memory.
func (s *set) removeExpired(n int) {
	for el := s.order.Front(); n > 0 && el != nil && el.Value.(*entry).seen < s.cut; el = s.order.Front() {
		s.remove(el)
		n--
	}
}

func (s *set) remove(el *list.Element) {
	e := el.Value.(*entry)
	delete(s.byKey, e.key)
	s.order.Remove(el)
	s.count.add(e.seen, -1)
	s.keyBytes -= memcap.String(len(e.key))
}
