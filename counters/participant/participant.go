// Package participant implements participant counters: how many distinct
// users (keys) were active under a name within a timeout.
//
// Visit records that a key was seen now, and VisitMany does the same for
// a batch of keys in one operation; Leave forgets a key; Active counts
// the keys seen within a timeout. Each name has one set of keys with
// their last-seen times, and every count is read from that set: there is
// no separate running counter to drift from it, so a repeated Visit is
// never counted twice, a Leave without a Visit changes nothing, and the
// count is never negative.
//
// Time is in whole Unix seconds. A key is active while
// last_seen + timeout >= now. A Visit also drops the name's expired keys,
// as the BBS does, so a name's timeout is meant to stay the same from
// call to call: a Visit with a shorter timeout drops keys that a longer
// one would still count. A timeout of 0 means DefaultTimeout.
//
// Three stores implement Store: Memory (this process only), Redis (one
// sorted set per name, shared by every instance) and File (the BBS's
// bbs.cnt format). All are safe for concurrent use.
package participant

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/names"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// Limits and defaults.
const (
	// DefaultName is the name whose set is the File store's own file, so
	// that pointing the store at an existing bbs.cnt serves it under this
	// name.
	DefaultName = "default"
	// MaxNameLen is the length limit of a name, in bytes: the name rule
	// every counter kind but the resource counters shares.
	MaxNameLen = names.MaxLen
	// MaxKeyLen is the length limit of a key, in bytes.
	MaxKeyLen = 255
	// MaxBatch is the most keys one VisitMany takes. It bounds the work
	// one call holds a lock (or the Redis server) for; 10000 keys of
	// MaxKeyLen bytes are about 2.5 MB of arguments.
	MaxBatch = 10000
	// DefaultTimeout is the timeout used when 0 is given: the BBS's
	// CNTLIMIT default.
	DefaultTimeout = 300 * time.Second
	// MaxTimeout is the longest timeout: the most the counter protocol's
	// 32-bit seconds field can carry.
	MaxTimeout = wire.MaxTimeout
)

// A Store holds participant sets, one per name.
type Store interface {
	// Leave forgets key under name. It returns the number of keys left
	// and whether key was there to remove. Leave has no timeout, so the
	// count may include keys that expired since the name's last Visit;
	// Active gives the exact figure.
	Leave(ctx context.Context, name, key string) (active int, removed bool, err error)
	// Active returns the number of keys under name seen within timeout.
	// It changes nothing (the File store may rewrite a damaged file).
	Active(ctx context.Context, name string, timeout time.Duration) (int, error)
	// VisitMany records every key of keys as seen now under name, in one
	// operation: it drops the name's
	// expired keys and returns the number of keys left (the active
	// count) and how many of keys were not active before (duplicates
	// within keys count once). keys holds 1 to MaxBatch valid keys;
	// otherwise VisitMany returns ErrInvalidKey and changes nothing.
	// The function Visit is VisitMany with one key.
	VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (active int, added int, err error)
}

// Errors returned by the stores; test for them with errors.Is.
var (
	// ErrInvalidName is returned for an empty name or one longer than MaxNameLen.
	ErrInvalidName = errors.New("participant: invalid name")
	// ErrNoMemory is returned when creating a new counter name would pass
	// the store's cap (names or bytes in memory, or the headroom a shared
	// Redis keeps for the bot); names that exist keep working.
	ErrNoMemory = errors.New("participant: out of memory for new counter names")
	// ErrTooManyKeys is returned by a Visit that would leave a name with
	// more keys than the store's cap (KeyCap); it changes nothing.
	ErrTooManyKeys = errors.New("participant: too many keys in one name")
	// ErrInvalidKey is returned for an empty key, one longer than
	// MaxKeyLen, (File store) one containing a comma or a line break, and
	// for a VisitMany batch of no keys or more than MaxBatch.
	ErrInvalidKey = errors.New("participant: invalid key")
	// ErrInvalidTimeout is returned for a negative timeout, one below one
	// second, or one above MaxTimeout.
	ErrInvalidTimeout = errors.New("participant: invalid timeout")
)

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
	_ Store = (*File)(nil)
)

// DefaultMaxKeys is the default cap on the keys of one name: 100,000 keys
// of 255 bytes take about 44 MB in Redis (440 bytes a key, measured by
// TestVisitRedisCostPerKey) and 37 MB in the memory store (the estimate
// of docs/COUNTERS.md's caps).
const DefaultMaxKeys = 100_000

// A KeyCap caps the keys one name holds in a store (Redis.SetMaxKeys,
// Memory.SetMaxKeys, File.SetMaxKeys) and counts the visits it refused.
// A nil *KeyCap caps nothing. It is safe for concurrent use.
type KeyCap struct {
	// Max is the most keys a name may hold after a visit, at least 1.
	Max int
	// Setting names the setting of Max in refusals, e.g.
	// "COUNTERS_PARTICIPANT_MAX_KEYS".
	Setting string

	refusals atomic.Uint64
}

// Refusals is the number of visits the cap refused.
func (c *KeyCap) Refusals() uint64 {
	if c == nil {
		return 0
	}
	return c.refusals.Load()
}

// max is the cap as a script argument: 0 for none.
func (c *KeyCap) max() int {
	if c == nil {
		return 0
	}
	return c.Max
}

// over reports whether n keys pass the cap.
func (c *KeyCap) over(n int) bool { return c != nil && n > c.Max }

// refused counts a visit refused because name would hold n keys, and
// returns ErrTooManyKeys saying so.
func (c *KeyCap) refused(name string, n int) error {
	c.refusals.Add(1)
	return fmt.Errorf("%w: %q would hold %d keys, past the cap of %d (%s)", ErrTooManyKeys, name, n, c.Max, c.Setting)
}

// IPKey returns the BBS's user key for an IP address:
// hexdec(substr(md5(ip), 0, 8)), the first 32 bits of the MD5 of the
// address text as a decimal number. IPKey("192.168.1.1") is "1727004492".
func IPKey(ip string) string {
	sum := md5.Sum([]byte(ip))
	return strconv.FormatUint(uint64(binary.BigEndian.Uint32(sum[:4])), 10)
}

func checkKey(key string) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// seconds returns timeout in whole seconds, DefaultTimeout for 0.
func seconds(timeout time.Duration) (int64, error) {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < time.Second || timeout > MaxTimeout {
		return 0, fmt.Errorf("%w: %v, want 0 (default %v) or 1s to %v", ErrInvalidTimeout, timeout, DefaultTimeout, MaxTimeout)
	}
	return int64(timeout / time.Second), nil
}

// checkActive validates Active's arguments and returns the timeout in
// seconds.
func checkActive(name string, timeout time.Duration) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	return seconds(timeout)
}

// checkLeave validates Leave's arguments.
func checkLeave(name, key string) error {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return err
	}
	return checkKey(key)
}

// checkVisitMany validates VisitMany's arguments, each key also against
// the store's own rule when storeKey is not nil, and returns the timeout
// in seconds. A single key's error reads as Visit's, without an index.
func checkVisitMany(name string, keys []string, timeout time.Duration, storeKey func(string) error) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	if len(keys) == 0 || len(keys) > MaxBatch {
		return 0, fmt.Errorf("%w: a batch of %d keys, want 1 to %d", ErrInvalidKey, len(keys), MaxBatch)
	}
	for i, key := range keys {
		err := checkKey(key)
		if err == nil && storeKey != nil {
			err = storeKey(key)
		}
		if err != nil {
			if len(keys) > 1 {
				err = fmt.Errorf("keys[%d]: %w", i, err)
			}
			return 0, err
		}
	}
	return seconds(timeout)
}

// Visit records key as seen now under name in s and drops the name's
// expired keys, as s.VisitMany with the one key. It returns the number of
// keys left (the active count) and whether key was not active before this
// visit: a key whose last visit has expired counts as new again.
func Visit(ctx context.Context, s Store, name, key string, timeout time.Duration) (active int, isNew bool, err error) {
	n, added, err := s.VisitMany(ctx, name, []string{key}, timeout)
	if err != nil {
		return 0, false, err
	}
	return n, added == 1, nil
}

// active reports whether a key last seen at seen is active at now.
func active(seen, timeout, now int64) bool {
	return seen+timeout >= now
}
