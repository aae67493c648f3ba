// Package freq counts how often the same message was seen in a sliding time
// window, in Redis, shared by every process that uses the same server.
//
// A Store records one occurrence of an identity (the text of a message, or
// whatever the caller uses to say "the same message") per call and answers
// how many earlier occurrences are still inside the window:
//
//	s, err := freq.New(rdb, freq.Options{})
//	if err != nil { … }
//	if err := s.Load(ctx); err != nil { … }
//	previous, duplicate, err := s.Count(ctx, text, dedupeKey)
//	// previous is 0 the first time a text is seen in 24 hours; duplicate
//	// says dedupeKey was counted already (the same answer, nothing added).
//
// Each call is one Lua script run, atomic in Redis: it answers a retried
// message from its dedupe state, reads the clock (Redis TIME, one clock for
// all processes), drops the occurrences that left the window, counts the
// rest, appends this one and refreshes the key's expiry. Memory is small per
// text and bounded: a text seen once is one short key holding an integer,
// a text seen more often one list of small integers, one per distinct
// second, so a hot text costs at most about two bytes per second of the
// window. The messages' dedupe state lives in two hashes per cluster slot
// that expire by turns. Keys
// expire on their own once a text goes quiet, so no sweeper is needed; keys
// of the former layout (internal/runlist's list and total, and a key per
// message) are read and converted when their text is next counted. text.lua says what each key
// holds.
//
// All keys of one identity share a Redis Cluster hash tag, so the script
// touches a single slot and works on a single server, a Ring or a Cluster.
package freq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/runlist"
)

// Defaults and limits.
const (
	// DefaultWindow is the window used when Options.Window is zero.
	DefaultWindow = 24 * time.Hour
	// DefaultPrefix is the service's base prefix when Options.Prefix is
	// empty; every key starts with the base prefix followed by keyPart.
	DefaultPrefix = "vkc:"
	// keyPart follows the base prefix in every key of a Store.
	keyPart = "f:"
	// DefaultDedupeTTL is how long a message's dedupe key is remembered
	// at least when Options.DedupeTTL is zero: longer than VK keeps
	// retrying an event.
	DefaultDedupeTTL = time.Hour
	// MaxDedupeKey is the longest dedupe key the former layout wrote as it
	// is into a key name, in bytes; a longer one was written as its SHA-256
	// (KeyPart), so no key is refused for its length (a refused event
	// would be re-delivered forever).
	MaxDedupeKey = 128

	// keyMargin is added to the window for the keys' TTL, so an entry never
	// vanishes while it can still be counted, even if the script runs a
	// little later than the clock it read.
	keyMargin = time.Minute
)

// ErrInvalid is wrapped by every error about bad options or arguments.
// Such a call sends nothing to Redis.
var ErrInvalid = errors.New("freq: invalid input")

// Options configure a Store. Zero fields mean the documented defaults.
type Options struct {
	// Window is how long an occurrence is counted, in whole seconds, at
	// least one second. Zero means DefaultWindow.
	Window time.Duration
	// Prefix is the service's base prefix: every key starts with it
	// followed by "f:". Empty means DefaultPrefix. It may not hold a
	// brace, which would change the keys' Redis Cluster hash tags.
	Prefix string
	// DedupeTTL is how long a message's dedupe key is remembered at least
	// (at most twice as long), in whole seconds (rounded up), at least one
	// second. Zero means DefaultDedupeTTL.
	DedupeTTL time.Duration
}

// A result is the script's answer for one occurrence.
type result struct {
	// Previous is the number of earlier occurrences of the identity inside
	// the window: 0 the first time.
	Previous int64
	// Duplicate reports that the dedupe key had already been counted:
	// nothing changed, and Previous and Time are those of the first count.
	Duplicate bool
	// Time is the unix second the occurrence was recorded at. It is the tail
	// of the identity's list rather than the clock when the clock was behind.
	// Only the tests read it.
	Time int64
}

// A Store counts occurrences in Redis. It is safe for concurrent use.
type Store struct {
	rdb    redis.Scripter
	prefix string
	window time.Duration
	// Script arguments that never change, precomputed: window, key TTL
	// and dedupe bucket in seconds; fixed is them as the first ARGV on
	// Redis's clock, boxed once.
	windowArg, keyTTLArg, dedupeArg string
	fixed                           [4]any
	// formerFor is how long after the compact layout began the former
	// layout's keys can live (the window and the dedupe time, and a
	// margin); formerUntil is when that is over, in unix seconds, as Load
	// read it from the marker: 0 until then (the former keys are read).
	formerFor   time.Duration
	formerUntil atomic.Int64
}

// The last argument of the counting scripts (text_args, textpeek.lua):
// whether to read the former layout's keys, boxed once.
var (
	readFormer any = "1"
	skipFormer any = ""
)

// New returns a Store that runs its script on rdb (a *redis.Client,
// *redis.Ring or *redis.ClusterClient), or an error wrapping ErrInvalid
// for a nil client or invalid options. It does not contact Redis.
func New(rdb redis.Scripter, opts Options) (*Store, error) {
	s := &Store{rdb: rdb, prefix: opts.Prefix, window: opts.Window}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	s.prefix += keyPart
	if s.window == 0 {
		s.window = DefaultWindow
	}
	dedupe := opts.DedupeTTL
	if dedupe == 0 {
		dedupe = DefaultDedupeTTL
	}
	switch {
	case rdb == nil:
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	case s.window < time.Second:
		return nil, fmt.Errorf("%w: window %v is shorter than 1s", ErrInvalid, s.window)
	case s.window > math.MaxInt64-keyMargin:
		return nil, fmt.Errorf("%w: window %v is too long", ErrInvalid, s.window)
	case s.window%time.Second != 0:
		return nil, fmt.Errorf("%w: window %v is not a whole number of seconds", ErrInvalid, s.window)
	case dedupe < time.Second:
		return nil, fmt.Errorf("%w: dedupe TTL %v is shorter than 1s", ErrInvalid, dedupe)
	case dedupe > 100*365*24*time.Hour:
		return nil, fmt.Errorf("%w: dedupe TTL %v is too long", ErrInvalid, dedupe)
	}
	if err := checkPrefix(s.prefix); err != nil {
		return nil, err
	}
	s.windowArg = strconv.FormatInt(int64(s.window/time.Second), 10)
	s.keyTTLArg = strconv.FormatInt(int64((s.window+keyMargin)/time.Second), 10)
	s.dedupeArg = strconv.FormatInt(int64((dedupe+time.Second-1)/time.Second), 10)
	s.fixed = [4]any{s.windowArg, s.keyTTLArg, s.dedupeArg, ""}
	s.formerFor = s.window + keyMargin + dedupe + keyMargin
	return s, nil
}

// Window returns the window occurrences are counted in.
func (s *Store) Window() time.Duration { return s.window }

// Load sends the scripts to Redis (SCRIPT LOAD; to every master of a
// cluster), so the first Count or Seen need not send its source. Counting
// works without it: a script missing from Redis's cache is sent again.
//
// It also reads when the compact layout began in this Redis, from a
// marker (KEY_PREFIX + "f:layout") the first Load writes: the former
// layout's keys, written by versions before it, are read and converted
// until they have all expired since, the window and the dedupe time
// later (and a margin), and no more after, which spares every count two
// Redis calls. A Store not loaded reads them.
func (s *Store) Load(ctx context.Context) error {
	for _, sc := range []*redis.Script{textScript.Script, seenScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("freq: load script: %w", err)
		}
	}
	began, err := layoutScript.Run(ctx, s.rdb, []string{s.layoutKey()}).Int64()
	if err != nil {
		return fmt.Errorf("freq: read when the layout began: %w", err)
	}
	if began < 0 {
		return fmt.Errorf("freq: the layout marker %s does not hold a unix second", s.layoutKey())
	}
	s.formerUntil.Store(time.Unix(began, 0).Add(s.formerFor).Unix())
	return nil
}

// layoutKey is the marker of when the compact layout began.
func (s *Store) layoutKey() string { return s.prefix + "layout" }

// formerArg is the counting scripts' last argument: whether the former
// layout's keys may still live.
func (s *Store) formerArg() any {
	if until := s.formerUntil.Load(); until != 0 && time.Now().Unix() >= until {
		return skipFormer
	}
	return readFormer
}

// Count records one occurrence of identity at the time of Redis's clock and
// returns previous, how many earlier ones are inside the window: 0 the
// first time. A non-empty dedupe key (a VK event id, or the message's own
// identity) makes the call idempotent: a repeated key for the same
// identity, within the dedupe TTL, changes nothing and gets the first
// answer back with duplicate set, so a late run of a call whose caller gave
// up is recognised when the message comes again. An empty dedupe key is
// always counted.
func (s *Store) Count(ctx context.Context, identity, dedupe string) (previous int64, duplicate bool, err error) {
	r, err := s.count(ctx, identity, dedupe, "")
	return r.Previous, r.Duplicate, err
}

// countAt is Count with an explicit clock: the occurrence is recorded at
// at, truncated to the second (or at the newest recorded second, if that is
// later).
func (s *Store) countAt(ctx context.Context, identity, dedupe string, at time.Time) (result, error) {
	u, err := unixArg(at)
	if err != nil {
		return result{}, err
	}
	return s.count(ctx, identity, dedupe, u)
}

// unixArg returns at as a script's time argument (runlist.TimeArg), or an
// error wrapping ErrInvalid for a time outside 1970 to 9999.
func unixArg(at time.Time) (string, error) {
	u, ok := runlist.TimeArg(at)
	if !ok {
		return "", fmt.Errorf("%w: time %v is outside 1970 to 9999", ErrInvalid, at)
	}
	return u, nil
}

// NewScript returns a script that counts a text as Count does and does
// more in the same atomic run: the counting functions (runlist's count.lua,
// text.lua)
// followed by main. main reads the count's keys and arguments with
// text_args(), which returns them as c, and its own after them: KEYS from
// c.nkeys + 1 and ARGV from 7. It counts with clock, find and add
// (text.lua) and replies as Count's script does, {previous, duplicate,
// time}, or with an error. Store.CountWith runs it.
func NewScript(main string) *redisconn.Script {
	return redisconn.NewScript(runlist.Lua() + textLib + main)
}

// CountWith runs sc, a script from NewScript, for identity and dedupe,
// with keys and args after the count's own, and answers as Count. keys
// (at most maxExtraKeys) must be served by the same Redis server as the
// count's keys: they are in another slot, so this is for a single server,
// not a cluster. An error the script replies is returned wrapped
// (redisconn.IsError finds it). args are handed to go-redis as they are: a
// pointer to a number or a string costs no allocation where a number or a
// string put in an interface costs one.
func (s *Store) CountWith(ctx context.Context, sc *redisconn.Script, identity, dedupe string, keys []string, args ...any) (previous int64, duplicate bool, err error) {
	if len(keys) > maxExtraKeys {
		return 0, false, fmt.Errorf("%w: %d keys after the count's, at most %d", ErrInvalid, len(keys), maxExtraKeys)
	}
	k := s.keys(identity, dedupe)
	n := k.n + copy(k.names[k.n:], keys)
	v, err := sc.Exec(ctx, s.rdb, k.names[:n], append(s.args(k, "", len(args)), args...)).Result()
	if err != nil {
		return 0, false, fmt.Errorf("freq: count: %w", err)
	}
	r, err := parseReply(v)
	return r.Previous, r.Duplicate, err
}

// Client returns the client s runs its scripts on: a caller of CountWith
// checks with it that its own keys are on the same server.
func (s *Store) Client() redis.Scripter { return s.rdb }

// count runs the script; at is a unix second or "" for Redis TIME.
func (s *Store) count(ctx context.Context, identity, dedupe, at string) (result, error) {
	k := s.keys(identity, dedupe)
	v, err := textScript.Exec(ctx, s.rdb, k.names[:k.n], s.args(k, at, 0)).Result()
	if err != nil {
		return result{}, fmt.Errorf("freq: count: %w", err)
	}
	return parseReply(v)
}

// args returns the ARGV that text_args reads (text.lua) for k, counting at
// at (a unix second, or "" for Redis TIME), with room for extra more.
func (s *Store) args(k *textKeys, at string, extra int) []any {
	args := make([]any, len(s.fixed), len(s.fixed)+2+extra)
	copy(args, s.fixed[:])
	if at != "" {
		args[3] = at
	}
	return append(args, &k.hash, s.formerArg())
}
