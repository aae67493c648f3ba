package access

import (
	"context"
	"fmt"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// MaxListLimit is the most counters one List call returns: the
// protocol's List limit.
const MaxListLimit = wire.MaxListLimit

// An Entry is one counter of a listing.
type Entry struct {
	Name  string `json:"name"`
	Total int64  `json:"total"`
}

// A Lister is a Store that lists its counters by name prefix, in byte
// order of the names, a page at a time. Memory and Redis are Listers; File
// is not (its directory names are not the counter names in order).
type Lister interface {
	// List returns up to limit (1 to MaxListLimit) counters whose names
	// start with prefix and come after after (all of them for an empty
	// after), in byte order, and whether more follow. Paging with after
	// set to the last name of the previous page lists every counter that
	// existed when the listing began exactly once; a counter created
	// meanwhile may or may not be listed, never twice.
	List(ctx context.Context, prefix, after string, limit int) (entries []Entry, more bool, err error)
}

var (
	_ Lister = (*Memory)(nil)
	_ Lister = (*Redis)(nil)
)

func checkList(prefix string, limit int) error {
	if len(prefix) > MaxNameLen {
		return fmt.Errorf("%w: prefix of %d bytes, want at most %d", ErrInvalidName, len(prefix), MaxNameLen)
	}
	if limit < 1 || limit > MaxListLimit {
		return fmt.Errorf("%w: %d, want 1 to %d", ErrInvalidLimit, limit, MaxListLimit)
	}
	return nil
}

// prefixEnd returns the smallest string greater than every string that
// starts with prefix, or "" if there is none (prefix empty or all 0xff).
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return ""
	}
	b[len(b)-1]++
	return string(b)
}

// List lists counters by prefix; see Lister. It is O(log n + limit).
func (m *Memory) List(ctx context.Context, prefix, after string, limit int) ([]Entry, bool, error) {
	if err := checkList(prefix, limit); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	end := prefixEnd(prefix)
	var entries []Entry
	more := false
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names.AscendGreaterOrEqual(max(prefix, after), func(name string) bool {
		if name == after {
			return true
		}
		if end != "" && name >= end {
			return false
		}
		if len(entries) == limit {
			more = true
			return false
		}
		entries = append(entries, Entry{Name: name, Total: m.totals[name]})
		return true
	})
	return entries, more, nil
}
