package freq

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

//go:embed peek.lua
var peekMain string

// peekScript reads a window without recording an occurrence.
var peekScript = redis.NewScript(countLib + peekMain)

// Windows counts hits on named counters in sliding windows given per call,
// with the engine of Store: run-length lists of seconds with TTLs, exact to
// the second, on Redis's clock. A counter is a name and a window together:
// hits on one name with different windows are different counters, each
// costing at most one list entry per second of its window.
//
// Keys: prefix + "{" + name + "}:" + window seconds + ":l" (the list) and
// ":n" (the total). Redis Cluster hashes the part of a key between its
// first "{" and the first "}" after it, so both keys of a counter hash
// the name up to its first "}" (names sharing that part share a slot).
// A name starting with "}" would leave that part empty, and the two keys
// would be hashed whole, into different slots; such a name's keys are
// prefix + "{#" + hex of the first 16 bytes of SHA-256(name) + "}#:" +
// window seconds + ":l" and ":n" instead. No other name's keys take that
// form: theirs have "}:" before the seconds, these "}#:".
//
// Hit is not idempotent: a Hit whose outcome is unknown (a timeout) may
// have counted, and sending it again may count twice. Count is: it only
// drops what left the window. It is safe for concurrent use.
type Windows struct {
	rdb    redis.Scripter
	prefix string
}

// NewWindows returns the window counters on rdb (a *redis.Client,
// *redis.Ring or *redis.ClusterClient) under prefix. It does not contact
// Redis. A nil rdb or an empty prefix is an error wrapping ErrInvalid.
func NewWindows(rdb redis.Scripter, prefix string) (*Windows, error) {
	switch {
	case rdb == nil:
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	case prefix == "":
		return nil, fmt.Errorf("%w: empty key prefix", ErrInvalid)
	}
	return &Windows{rdb: rdb, prefix: prefix}, nil
}

// Load sends the scripts to Redis (SCRIPT LOAD), so the first calls need
// not send their source.
func (w *Windows) Load(ctx context.Context) error {
	for _, sc := range []*redis.Script{windowScript, peekScript} {
		if err := sc.Load(ctx, w.rdb).Err(); err != nil {
			return fmt.Errorf("freq: load script: %w", err)
		}
	}
	return nil
}

// Hit records one hit on the counter (name, window) at the time of Redis's
// clock and returns how many earlier hits are inside the window. window is
// whole seconds, at least one second.
func (w *Windows) Hit(ctx context.Context, name string, window time.Duration) (int64, error) {
	return w.hit(ctx, name, window, "", 0)
}

// HitAt is Hit with an explicit clock, at truncated to the second; as for
// Store.CountAt, a time before the newest recorded second counts at that
// second. It exists for tests and for tools that prefill history.
func (w *Windows) HitAt(ctx context.Context, name string, window time.Duration, at time.Time) (int64, error) {
	u, err := unixArg(at)
	if err != nil {
		return 0, err
	}
	return w.hit(ctx, name, window, u, 0)
}

// ErrNewCounter is the error of HitChecked on a counter that has no keys,
// refused past the headroom.
var ErrNewCounter = errors.New("freq: new counter refused")

// ErrGrowth is the error of HitChecked on a counter that has keys, refused
// past the headroom because the hit would add an entry to its list (a new
// second) while none leaves the window.
var ErrGrowth = errors.New("freq: counter growth refused")

// HitChecked is Hit (or HitAt, when at is not the zero time) that checks
// the server's used_memory against the headroom percent pct (see
// headroom.Guard.Check; 0: no check) before it creates the counter or
// grows it: past the limit it creates nothing and answers ErrNewCounter
// for a counter that has no keys, and ErrGrowth for a hit in a new second
// while no entry leaves the window; a hit in the second of the newest
// entry still counts. The check and the hit are one script run.
func (w *Windows) HitChecked(ctx context.Context, name string, window time.Duration, at time.Time, pct int) (int64, error) {
	u := ""
	if !at.IsZero() {
		var err error
		if u, err = unixArg(at); err != nil {
			return 0, err
		}
	}
	return w.hit(ctx, name, window, u, pct)
}

// Count returns how many hits on the counter (name, window) are inside the
// window now, without hitting it.
func (w *Windows) Count(ctx context.Context, name string, window time.Duration) (int64, error) {
	return w.count(ctx, name, window, "")
}

// CountAt is Count with an explicit clock.
func (w *Windows) CountAt(ctx context.Context, name string, window time.Duration, at time.Time) (int64, error) {
	u, err := unixArg(at)
	if err != nil {
		return 0, err
	}
	return w.count(ctx, name, window, u)
}

func (w *Windows) hit(ctx context.Context, name string, window time.Duration, at string, pct int) (int64, error) {
	keys, secs, ttl, err := w.keys(name, window)
	if err != nil {
		return 0, err
	}
	// No dedupe key: ARGV[3], its TTL, is unused.
	v, err := windowScript.Run(ctx, w.rdb, keys, secs, ttl, "0", at, pct).Result()
	if errors.Is(err, redis.Nil) {
		return 0, ErrNewCounter
	}
	if err != nil {
		return 0, fmt.Errorf("freq: window hit: %w", err)
	}
	if v == headroom.GrowthReply {
		return 0, ErrGrowth
	}
	res, err := parseReply(v)
	if err != nil {
		return 0, err
	}
	return res.Previous, nil
}

func (w *Windows) count(ctx context.Context, name string, window time.Duration, at string) (int64, error) {
	keys, secs, _, err := w.keys(name, window)
	if err != nil {
		return 0, err
	}
	n, err := peekScript.Run(ctx, w.rdb, keys, secs, at).Int64()
	if err != nil {
		return 0, fmt.Errorf("freq: window count: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("freq: unexpected script reply %d", n)
	}
	return n, nil
}

// keys returns the keys of the counter (name, window), the window in
// seconds and the keys' TTL in seconds as script arguments.
func (w *Windows) keys(name string, window time.Duration) (keys []string, secs, ttl string, err error) {
	if window < time.Second || window%time.Second != 0 || window > math.MaxInt64-keyMargin {
		return nil, "", "", fmt.Errorf("%w: window %v, want whole seconds, at least 1s", ErrInvalid, window)
	}
	secs = strconv.FormatInt(int64(window/time.Second), 10)
	ttl = strconv.FormatInt(int64((window+keyMargin)/time.Second), 10)
	base := w.prefix + windowTag(name) + ":" + secs + ":"
	return []string{base + "l", base + "n"}, secs, ttl, nil
}

// windowTag returns the part of a window counter's keys that holds its
// Redis Cluster hash tag: "{" + name + "}", or, for a name whose tag would
// be empty (it starts with "}"), "{#" + digest + "}#" (see Windows).
func windowTag(name string) string {
	if !strings.HasPrefix(name, "}") {
		return "{" + name + "}"
	}
	sum := sha256.Sum256([]byte(name))
	return "{#" + hex.EncodeToString(sum[:16]) + "}#"
}

// unixArg returns at as a script's time argument.
func unixArg(at time.Time) (string, error) {
	u := at.Unix()
	if u < 0 || u > maxUnix {
		return "", fmt.Errorf("%w: time %v is outside 1970 to 9999", ErrInvalid, at)
	}
	return strconv.FormatInt(u, 10), nil
}
