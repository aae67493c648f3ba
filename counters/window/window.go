// Package window implements sliding-window counters: how many hits a named
// counter got in the last W seconds (API requests of one user in the last
// hour, say).
//
// Hit records one hit and returns how many earlier hits are inside the
// window (0 the first time, the bot's semantics); Count reads the number
// inside the window without hitting. Windows are whole seconds from 1 s to
// MaxWindow and exact to the second: a hit at second t is outside the
// window once t <= now - W. A counter is a name and a window together:
// hits with a window of 60 s and of 3600 s on the same name are two
// counters. Memory is bounded per counter: at most one entry per second of
// its window, however many hits it takes.
//
// Two stores implement Store: Memory, in this process only, and Redis,
// shared by every instance on the same Redis, in the list-and-total layout
// of internal/runlist (the layout of the bot's message window before its
// compact one).
package window

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/names"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// Limits.
const (
	// MaxNameLen is the length limit of a counter name, in bytes: the name
	// rule every counter kind but the resource counters shares.
	MaxNameLen = names.MaxLen
	// MaxWindow is the longest window: the protocol's.
	MaxWindow = wire.MaxWindow
)

// A Store holds named window counters. Every method returns
// ErrInvalidName or ErrInvalidWindow for bad arguments, and then changes
// nothing.
type Store interface {
	// Hit records one hit on the counter (name, window) and returns how many
	// earlier hits are inside the window.
	Hit(ctx context.Context, name string, window time.Duration) (int64, error)
	// Count returns how many hits on (name, window) are inside the window.
	Count(ctx context.Context, name string, window time.Duration) (int64, error)
}

// Errors returned by the stores; test for them with errors.Is.
var (
	// ErrInvalidName is returned for an empty name or one longer than
	// MaxNameLen.
	ErrInvalidName = errors.New("window: invalid counter name")
	// ErrNoMemory is returned when creating a new counter name would pass
	// the store's cap (names or bytes in memory, or the headroom a shared
	// Redis keeps for the bot); names that exist keep working.
	ErrNoMemory = errors.New("window: out of memory for new counter names")
	// ErrInvalidWindow is returned for a window that is not whole seconds
	// from 1 s to MaxWindow.
	ErrInvalidWindow = errors.New("window: invalid window")
	// ErrInvalidTime is returned by a Redis store given a clock
	// (WithClock) whose time is outside 1970 to 9999.
	ErrInvalidTime = errors.New("window: invalid time")
)

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
)

// check validates the arguments of every call and returns the window in
// seconds.
func check(name string, window time.Duration) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	if window < time.Second || window > MaxWindow || window%time.Second != 0 {
		return 0, fmt.Errorf("%w: %v, want whole seconds from 1 to %d", ErrInvalidWindow, window, int64(MaxWindow/time.Second))
	}
	return int64(window / time.Second), nil
}
