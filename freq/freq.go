// Package freq counts how often the same message was seen in a sliding time
// window, in Redis, shared by every process that uses the same server, and
// queues the message's reply in the same step.
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
// Record does the same for a Message and queues its reply (a stream entry
// with the answer as its text and the community's next random_id) once
// per message, in one script run on a single server (record.lua) and in
// two on a Redis Cluster; Queue queues a reply alone.
//
// Each call is a Lua script run, atomic in Redis: it answers a retried
// message from its record, reads the clock (Redis TIME, one clock for all
// processes), drops the occurrences that left the window, counts the rest
// and appends this one. Memory is small per text and bounded: a text seen
// once is one field of a small hash shared by the texts of its bucket
// (about 17 bytes in Redis), a text seen more often one list of small
// integers, one per distinct second, so a hot text costs at most about two
// bytes per second of the window. Keys expire on their own once their
// texts go quiet, and a bucket drops its expired texts when written, so no
// sweeper is needed. text.lua, reply.lua and count.lua say what each key
// holds.
//
// Every key a script touches shares one Redis Cluster hash tag (a text's
// slot, or a community's), so each script works on a single server, a Ring
// or a Cluster.
package freq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Defaults and limits.
const (
	// DefaultWindow is the window used when Options.Window is zero.
	DefaultWindow = 24 * time.Hour
	// MinWindow is the shortest window: whole seconds, at least one.
	MinWindow = time.Second
	// DefaultPrefix is the service's base prefix when Options.Prefix is
	// empty; every key starts with the base prefix followed by keyPart.
	DefaultPrefix = "vkc:"
	// keyPart follows the base prefix in every key of a Store.
	keyPart = "f:"
	// DefaultDedupeTTL is how long a message's record is remembered at
	// least when Options.DedupeTTL is zero: longer than VK keeps retrying
	// an event.
	DefaultDedupeTTL = time.Hour
	// MaxUnix is the latest second a count is made at (the end of year
	// 9999): Lua prints numbers with 14 significant digits.
	MaxUnix = 253402300799

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
	// DedupeTTL is how long a message's record is remembered at least
	// (at most twice as long), in whole seconds (rounded up), at least one
	// second. Zero means DefaultDedupeTTL.
	DedupeTTL time.Duration
	// Cluster says rdb is a Redis Cluster: a message's text and its reply's
	// queue are then in different slots, and Record makes two calls.
	Cluster bool
	// BucketBits is k: the texts seen once are kept in 2^k buckets by the
	// first k bits of their digest (keys.go), 1 to MaxBucketBits. Zero
	// means DefaultBucketBits. It is part of the layout (Load refuses keys
	// written with another k): changing it moves every text.
	BucketBits int
}

// A result is the script's answer for one occurrence.
type result struct {
	// Previous is the number of earlier occurrences of the identity inside
	// the window: 0 the first time.
	Previous int64
	// Duplicate reports that the dedupe key had already been counted:
	// nothing changed, Previous is that of the first count and Time 0.
	Duplicate bool
	// Time is the unix second the occurrence was recorded at. It is the tail
	// of the identity's list rather than the clock when the clock was behind.
	// Only the tests read it.
	Time int64
}

// A Store counts occurrences in Redis. It is safe for concurrent use.
type Store struct {
	rdb     redisconn.Scripter
	batch   *redisconn.Batcher // the writes' scripts: count, record, queue
	prefix  string
	window  time.Duration
	cluster bool
	// bucketBits is k (Options.BucketBits); layoutArg the layout marker's
	// value: Layout and k, "3:11".
	bucketBits int
	layoutArg  string
	// Script arguments that never change, precomputed: window, a new text
	// key's TTL, the margin and the dedupe period in seconds; count.lua's
	// first four and record.lua's ARGV[7..10], boxed once.
	windowArg, keyTTLArg, marginArg, dedupeArg string
	countFixed, recordFixed                    [4]any
}

// New returns a Store that runs its script on rdb (a *redis.Client,
// *redis.Ring or *redis.ClusterClient), or an error wrapping ErrInvalid
// for a nil client or invalid options. It does not contact Redis.
func New(rdb redisconn.Scripter, opts Options) (*Store, error) {
	s := &Store{rdb: rdb, prefix: opts.Prefix, window: opts.Window, cluster: opts.Cluster, bucketBits: opts.BucketBits}
	if s.bucketBits == 0 {
		s.bucketBits = DefaultBucketBits
	}
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
	case s.window < MinWindow:
		return nil, fmt.Errorf("%w: window %v is shorter than %v", ErrInvalid, s.window, MinWindow)
	case s.window > math.MaxInt64-keyMargin:
		return nil, fmt.Errorf("%w: window %v is too long", ErrInvalid, s.window)
	case s.window%time.Second != 0:
		return nil, fmt.Errorf("%w: window %v is not a whole number of seconds", ErrInvalid, s.window)
	case dedupe < time.Second:
		return nil, fmt.Errorf("%w: dedupe TTL %v is shorter than 1s", ErrInvalid, dedupe)
	case dedupe > 100*365*24*time.Hour:
		return nil, fmt.Errorf("%w: dedupe TTL %v is too long", ErrInvalid, dedupe)
	case s.bucketBits < 1 || s.bucketBits > MaxBucketBits:
		return nil, fmt.Errorf("%w: bucket bits %d, want 1 to %d", ErrInvalid, s.bucketBits, MaxBucketBits)
	}
	if err := checkPrefix(s.prefix); err != nil {
		return nil, err
	}
	s.layoutArg = strconv.Itoa(Layout) + ":" + strconv.Itoa(s.bucketBits)
	s.windowArg = strconv.FormatInt(int64(s.window/time.Second), 10)
	s.keyTTLArg = strconv.FormatInt(int64((s.window+keyMargin)/time.Second), 10)
	s.marginArg = strconv.FormatInt(int64(keyMargin/time.Second), 10)
	s.dedupeArg = strconv.FormatInt(int64((dedupe+time.Second-1)/time.Second), 10)
	s.countFixed = [4]any{s.windowArg, s.keyTTLArg, s.marginArg, s.dedupeArg}
	s.recordFixed = [4]any{s.windowArg, s.keyTTLArg, s.marginArg, ""}
	s.batch = redisconn.NewBatcher(rdb, redisconn.BatchOptions{})
	return s, nil
}

// Window returns the window occurrences are counted in.
func (s *Store) Window() time.Duration { return s.window }

// Load checks the layout the keys under the prefix are written in, and
// sends the scripts' libraries to Redis where it runs functions (FUNCTION
// LOAD; not on a cluster), else the scripts (SCRIPT LOAD; to every master
// of a cluster), so the first Count or Record need not send its source
// (counting works without it: a script or library missing from Redis is
// sent again).
//
// The layout's version is kept in Redis (KEY_PREFIX + "f:layout"),
// written by the first Load with the bucket bits ("3:11"): a Redis written
// in another layout (layouts 1 and 2, a later version, a development build
// before versions, or another BucketBits) is refused with an error
// wrapping ErrLayout, which names both, rather than read wrongly. From the
// first release on, a layout change ships its own migration.
func (s *Store) Load(ctx context.Context) error {
	if err := s.checkLayout(ctx); err != nil {
		return err
	}
	if err := s.batch.Load(ctx, countScript.Library(), recordScript.Library()); err != nil {
		return fmt.Errorf("freq: load libraries: %w", err)
	}
	scripts := []*redis.Script{seenScript}
	if !s.batch.Functions() {
		scripts = append(scripts, countScript.Script, recordScript.Script, queueScript.Script)
	}
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("freq: load script: %w", err)
		}
	}
	return nil
}

// Functions reports whether the Store's scripts run as Redis functions
// (see Load): false before Redis 7, for a user whose ACL refuses them, on
// the embedded miniredis and on a Redis Cluster.
func (s *Store) Functions() bool { return s.batch.Functions() }

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

// unixArg returns at, truncated to the second, as a script's time argument
// (a unix second in decimal), or an error wrapping ErrInvalid for a time
// outside 1970 to 9999 (after MaxUnix).
func unixArg(at time.Time) (string, error) {
	u := at.Unix()
	if u < 0 || u > MaxUnix {
		return "", fmt.Errorf("%w: time %v is outside 1970 to 9999", ErrInvalid, at)
	}
	return strconv.FormatInt(u, 10), nil
}

// count runs count.lua; at is a unix second or "" for Redis TIME.
func (s *Store) count(ctx context.Context, identity, dedupe, at string) (result, error) {
	k := s.keys(identity, dedupe)
	args := [6]any{s.countFixed[0], s.countFixed[1], s.countFixed[2], s.countFixed[3], emptyArg, &k.hash}
	if at != "" {
		args[4] = at
	}
	v, err := s.batch.Run(ctx, countScript, k.names[:], args[:]).Result()
	if err != nil {
		return result{}, fmt.Errorf("freq: count: %w", err)
	}
	return parseReply(v)
}
