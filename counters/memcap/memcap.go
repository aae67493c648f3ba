// Package memcap bounds the in-memory stores of the counter kinds (access,
// participant, window, unique): a cap on the names a store holds and on
// the bytes it is estimated to take, and the estimates themselves.
//
// A store keeps one Budget under its own lock. Before it creates a name it
// asks Admit with the name's estimated cost; before a name that exists
// grows (a new participant key, a window hit in a new second, a unique
// sketch that takes more registers) it asks Fits with the growth; after
// any change it records the change with Add. New names are admitted up to
// seven eighths of MaxBytes: the last eighth is kept for the names that
// exist, so that a flood of new names does not stop them from counting.
//
// The estimates count what the Go runtime really allocates: strings and
// slices rounded up to their allocation size class, map slots at an
// average load, and the fixed parts of each entry.
package memcap

import "fmt"

// Defaults of Limits, for each kind's memory store.
const (
	// DefaultMaxNames is the default cap on names per store.
	DefaultMaxNames = 1_000_000
	// DefaultMaxBytes is the default cap on a store's estimated bytes
	// (256 MiB).
	DefaultMaxBytes = 256 << 20
)

// Limits cap one memory store. Zero (or negative) fields mean the
// defaults.
type Limits struct {
	// MaxNames is the most names (counters) the store holds; a new name
	// past it is refused. Zero means DefaultMaxNames.
	MaxNames int
	// MaxBytes caps the store's estimated memory in bytes: new names are
	// refused past seven eighths of it, and the growth of names that exist
	// past all of it. Zero means DefaultMaxBytes.
	MaxBytes int64
}

// withDefaults returns l with its zero or negative fields defaulted.
func (l Limits) withDefaults() Limits {
	if l.MaxNames <= 0 {
		l.MaxNames = DefaultMaxNames
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// A Budget counts a store's names and estimated bytes against its Limits.
// It is not safe for concurrent use: the store's lock guards it.
type Budget struct {
	lim   Limits
	noMem error // the kind's ErrNoMemory, wrapped by refusals
	names int
	bytes int64
}

// NewBudget returns an empty budget within lim (zero fields: the
// defaults) whose refusals wrap noMem, the kind's ErrNoMemory.
func NewBudget(lim Limits, noMem error) *Budget {
	return &Budget{lim: lim.withDefaults(), noMem: noMem}
}

// Admit returns nil if a new name of cost bytes fits, else an error
// wrapping the kind's ErrNoMemory that names the cap it would pass.
func (b *Budget) Admit(cost int64) error {
	if b.names >= b.lim.MaxNames {
		return fmt.Errorf("%w: the memory store holds %d names, its cap (max names)", b.noMem, b.names)
	}
	if limit := b.lim.MaxBytes - b.lim.MaxBytes/8; b.bytes+cost > limit {
		return fmt.Errorf("%w: the memory store holds an estimated %d bytes; a new name of %d more would pass %d, seven eighths of its cap of %d bytes (max bytes)",
			b.noMem, b.bytes, cost, limit, b.lim.MaxBytes)
	}
	return nil
}

// Fits returns nil if a name that exists may grow by growth bytes, else an
// error wrapping the kind's ErrNoMemory that names the cap.
func (b *Budget) Fits(growth int64) error {
	if growth > 0 && b.bytes+growth > b.lim.MaxBytes {
		return fmt.Errorf("%w: the memory store holds an estimated %d bytes; %d more would pass its cap of %d bytes (max bytes)",
			b.noMem, b.bytes, growth, b.lim.MaxBytes)
	}
	return nil
}

// Add records names more names and bytes more bytes (negative: fewer).
func (b *Budget) Add(names int, bytes int64) {
	b.names += names
	b.bytes += bytes
}

// Names returns the names recorded.
func (b *Budget) Names() int { return b.names }

// Bytes returns the estimated bytes recorded.
func (b *Budget) Bytes() int64 { return b.bytes }

// Limits returns the budget's limits, defaults applied.
func (b *Budget) Limits() Limits { return b.lim }
