package participant

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Memory is a Store that keeps its sets in this process. The zero value
// is not usable; call NewMemory. It is safe for concurrent use.
type Memory struct {
	clock func() time.Time

	mu   sync.Mutex // guards sets
	sets map[string]*set
}

// NewMemory returns an empty in-memory store reading the time from clock
// (time.Now when nil).
func NewMemory(clock func() time.Time) *Memory {
	if clock == nil {
		clock = time.Now
	}
	return &Memory{clock: clock, sets: make(map[string]*set)}
}

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
	if s == nil {
		s = &set{byKey: make(map[string]*list.Element), order: list.New()}
		m.sets[name] = s
	}
	added := 0
	for _, key := range keys {
		// A repeat of a key in keys finds it seen now: not new again.
		if s.visit(key, now, secs) {
			added++
		}
	}
	return s.order.Len(), added, nil
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
	el, ok := s.byKey[key]
	if ok {
		s.remove(el)
	}
	n := s.order.Len()
	if n == 0 {
		delete(m.sets, name)
	}
	return n, ok, nil
}

// Active returns the number of keys under name seen within timeout.
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
	defer m.mu.Unlock()
	s := m.sets[name]
	if s == nil {
		return 0, nil
	}
	n := s.order.Len()
	for el := s.order.Front(); el != nil && !active(el.Value.(*entry).seen, secs, now); el = el.Next() {
		n--
	}
	return n, nil
}

// A set is one name's keys, ordered by last-seen time so that expired
// keys are found at the front. It is not safe for concurrent use.
type set struct {
	byKey map[string]*list.Element // of *entry
	order *list.List               // of *entry, by seen ascending
}

type entry struct {
	key  string
	seen int64 // Unix seconds
}

// visit records key as seen at now, drops the expired keys and reports
// whether key was not active before.
func (s *set) visit(key string, now, timeout int64) (isNew bool) {
	isNew = true
	if el, ok := s.byKey[key]; ok {
		isNew = !active(el.Value.(*entry).seen, timeout, now)
		s.remove(el)
	}
	for el := s.order.Front(); el != nil && !active(el.Value.(*entry).seen, timeout, now); el = s.order.Front() {
		s.remove(el)
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
	return isNew
}

func (s *set) remove(el *list.Element) {
	delete(s.byKey, el.Value.(*entry).key)
	s.order.Remove(el)
}
