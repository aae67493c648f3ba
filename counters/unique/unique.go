// Package unique implements unique counters: the approximate number of
// distinct keys (user ids, IPs) added to a name, in constant memory per
// name, with HyperLogLog (Redis's: 2^14 registers, 0.81 % standard error,
// at most 12 KiB per name in Redis and 16 KiB in memory).
//
// Add adds keys and reports whether the estimate may have changed (a
// register rose: Redis's PFADD answer); adding a key again changes
// nothing. Count estimates the number of distinct keys of the union of
// one or more names. Two stores implement Store: Memory, in this process
// only, which computes exactly what Redis does (same hash, registers and
// estimator), and Redis (PFADD, PFCOUNT).
package unique

import (
	"context"
	"errors"
	"fmt"

	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// Limits.
const (
	// MaxNameLen is the length limit of a counter name (the name rule
	// every counter kind but the resource counters shares), and MaxKeyLen
	// of a key, in bytes.
	MaxNameLen = names.MaxLen
	MaxKeyLen  = 255
	// MaxKeys is the most keys one Add takes.
	MaxKeys = 1000
	// MaxNames is the most names one Count takes.
	MaxNames = 100
)

// A Store holds named unique counters. Bad arguments get ErrInvalidName,
// ErrInvalidKey or ErrInvalidCount and change nothing.
type Store interface {
	// Add adds 1 to MaxKeys keys to the counter name and reports whether
	// its estimate may have changed.
	Add(ctx context.Context, name string, keys []string) (bool, error)
	// Count returns the estimated number of distinct keys added to any of
	// 1 to MaxNames names, or ErrNotFound if none of them was ever added to.
	Count(ctx context.Context, names ...string) (int64, error)
}

// Errors returned by the stores; test for them with errors.Is.
var (
	ErrNotFound    = errors.New("unique: counter not found")
	ErrInvalidName = errors.New("unique: invalid counter name")
	// ErrNoMemory is returned when creating a new counter name would pass
	// the store's cap (names or bytes in memory, or the headroom a shared
	// Redis keeps for the bot); names that exist keep working.
	ErrNoMemory     = errors.New("unique: out of memory for new counter names")
	ErrInvalidKey   = errors.New("unique: invalid key")
	ErrInvalidCount = errors.New("unique: invalid number of keys or names")
)

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
)

func checkAdd(name string, keys []string) error {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return err
	}
	if len(keys) < 1 || len(keys) > MaxKeys {
		return fmt.Errorf("%w: %d keys, want 1 to %d", ErrInvalidCount, len(keys), MaxKeys)
	}
	for _, k := range keys {
		if len(k) == 0 || len(k) > MaxKeyLen {
			return fmt.Errorf("%w: length %d, want 1 to %d bytes", ErrInvalidKey, len(k), MaxKeyLen)
		}
	}
	return nil
}

func checkCount(counters []string) error {
	if len(counters) < 1 || len(counters) > MaxNames {
		return fmt.Errorf("%w: %d names, want 1 to %d", ErrInvalidCount, len(counters), MaxNames)
	}
	for _, n := range counters {
		if err := names.Check(n, ErrInvalidName); err != nil {
			return err
		}
	}
	return nil
}
