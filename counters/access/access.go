// Package access implements access counters: named monotonic counters
// that count total page views (or messages, or any other hits).
//
// Hit adds one to a counter and returns the new total; Add adds n at once,
// as n Hits would; Total reads it. A counter springs into existence on its
// first Hit (at 1) or Add (at n). Three stores implement Store:
//
//   - Memory keeps the counters in this process only;
//   - Redis keeps them in Redis (INCRBY), shared by every instance that
//     uses the same server and prefix;
//   - File keeps each counter in the BBS's multi-file format
//     (count0.dat … countN-1.dat), so an existing BBS count directory
//     works as it is, without losing increments under concurrency.
//
// Every store is safe for concurrent use, and every Hit or Add returns a
// distinct total: n concurrent Hits on a fresh counter return 1…n, each
// once, and n concurrent Add(ctx, name, k) return k, 2k, …, nk, each once.
package access

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// Limits and defaults.
const (
	// MaxNameLen is the length limit of a counter name, in bytes. A name
	// is any byte string of 1 to MaxNameLen bytes; the limit keeps it well
	// inside the counter protocol's 16-bit name length. Every counter kind
	// but the resource counters has this rule.
	MaxNameLen = names.MaxLen
	// DefaultName is the counter whose files live directly in the File
	// store's directory, so that pointing the store at an existing BBS
	// count directory serves that directory's total under this name.
	DefaultName = "default"
	// DefaultLevels is the number of count files per counter when NewFile
	// is given 0, as the BBS's COUNTLEVEL default.
	DefaultLevels = 5
	// MaxLevels is the largest number of count files per counter.
	MaxLevels = 64
)

// A Store holds named access counters. It has the primitives only; Hit
// is a function on any Store.
type Store interface {
	// Add adds n (n >= 1) to the counter name and returns its new total, as
	// n Hits would, in one operation. It returns ErrInvalidDelta for n < 1
	// and ErrOverflow when the total would pass math.MaxInt64; either way
	// the counter is left unchanged.
	Add(ctx context.Context, name string, n int64) (int64, error)
	// Total returns the counter's total, or ErrNotFound if it was never hit.
	Total(ctx context.Context, name string) (int64, error)
}

// Hit adds one to the counter name of s and returns its new total: it is
// s.Add(ctx, name, 1).
func Hit(ctx context.Context, s Store, name string) (int64, error) { return s.Add(ctx, name, 1) }

// Errors returned by the stores; test for them with errors.Is.
var (
	// ErrNotFound is returned by Total for a counter that was never hit.
	ErrNotFound = errors.New("access: counter not found")
	// ErrInvalidName is returned for an empty name or one longer than MaxNameLen.
	ErrInvalidName = errors.New("access: invalid counter name")
	// ErrNoMemory is returned when creating a new counter name would pass
	// the store's cap (names or bytes in memory, or the headroom a shared
	// Redis keeps for the bot); names that exist keep working.
	ErrNoMemory = errors.New("access: out of memory for new counter names")
	// ErrInvalidDelta is returned by Add for an n below 1.
	ErrInvalidDelta = errors.New("access: invalid increment")
	// ErrOverflow is returned by Hit and Add when the total would pass
	// math.MaxInt64.
	ErrOverflow = errors.New("access: counter overflow")
	// ErrInvalidLimit is returned by List for a limit out of range.
	ErrInvalidLimit = errors.New("access: invalid limit")
	// ErrCorrupt is returned by the File store when count files exist but
	// none of them holds a valid total, so the total cannot be recovered.
	ErrCorrupt = errors.New("access: no valid count file")
)

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
	_ Store = (*File)(nil)
)

// checkAdd validates Add's arguments.
func checkAdd(name string, n int64) error {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w: %d, want at least 1", ErrInvalidDelta, n)
	}
	return nil
}

// addTotal returns total+n, or ErrOverflow if that passes math.MaxInt64.
// Both are non-negative.
func addTotal(total, n int64) (int64, error) {
	if total > math.MaxInt64-n {
		return 0, fmt.Errorf("%w: %d + %d", ErrOverflow, total, n)
	}
	return total + n, nil
}
