// Package outbox keeps the bot's replies durably in Redis from before the
// webhook answers "ok" until VK accepted them.
//
// Each community has one Redis Stream with one consumer group. Add appends
// a reply; Take hands out new entries to this instance's consumer and takes
// over entries another consumer (a dead or stuck instance) has held longer
// than ClaimAfter; Done acknowledges entries and trims the stream up to the
// oldest one not finished, so the stream holds the replies not yet
// accepted by VK, and those finished while an older one still waits
// (acknowledged, never handed out again) until that one is finished too.
// While an instance shuts down,
// Drain hands out only what it still has to finish, and Release gives back
// what it could not, for the other instances to send at once. A reply may
// be handed out twice (after a crash between the send and Done); the
// random_id stored with the reply makes VK deliver it once.
//
// The files follow the life of an entry: add.go (Record, the one way a
// message's count and reply are stored, Add, the entry's fields), take.go (Take), handout.go (the rule that one instance
// never hands out an entry twice), recover.go (entries whose read was
// lost, and takeover from other instances), later.go (replies set aside
// until a due time, with their retry state), done.go, drain.go (Drain and
// Release), blockers.go (the connections of reads that wait) and stats.go.
package outbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// ConsumerGroup is the name of the stream consumer group every instance joins.
const ConsumerGroup = "senders"

// DefaultPrefix is the service's base prefix when Options.Prefix is
// empty; every key starts with the base prefix followed by keyPart.
const DefaultPrefix = "vkc:"

// The defaults of Options.MaxLen and Options.ClaimAfter (OUTBOX_MAX_LEN and
// OUTBOX_CLAIM_AFTER).
const (
	DefaultMaxLen     = 100000
	DefaultClaimAfter = 30 * time.Second
)

// MinClaimAfter is the shortest ClaimAfter the service may be given
// (OUTBOX_CLAIM_AFTER): a shorter one would take replies over from a
// sender still busy with them.
const MinClaimAfter = 100 * time.Millisecond

// keyPart follows the base prefix in every key of the outbox.
const keyPart = "o:"

// Options configure an Outbox. Zero fields mean the defaults.
type Options struct {
	// Prefix is the service's base prefix (default DefaultPrefix): every
	// key starts with it followed by "o:".
	Prefix string
	// MaxLen is the most entries per community's stream (DefaultMaxLen):
	// replies waiting, and those finished while an older one still waits
	// (see Done).
	MaxLen int64
	// ClaimAfter is how long an entry may stay unacknowledged with another
	// consumer before this one takes it over (DefaultClaimAfter).
	ClaimAfter time.Duration
	// LaterIdle is how long a Take leaves an empty later set unlooked at,
	// for replies another instance may set aside meanwhile (default
	// ClaimAfter); a waiting Take waits no longer than that either. Longer
	// costs an idle sender fewer commands.
	LaterIdle time.Duration
	// Consumer names this instance in the consumer group (default
	// hostname-pid-random). Two live instances must not share a name.
	Consumer string
	// OnceFor is how long Add and Record remember a message's reply at
	// least after adding it, in whole seconds (rounded up), at most twice
	// as long (default 1h, longer than VK keeps re-delivering an event).
	OnceFor time.Duration
	// Store counts the messages Record records and stores their replies
	// (see Record), on the outbox's Redis. Nil means a store of its own
	// with freq's defaults, which serves Add; Record then counts with
	// freq's default window.
	Store *freq.Store
	// Counter, when set, counts the messages Record records instead of
	// Store, and Record stores the reply with Add after it: two calls, as
	// on a Redis Cluster. It is for counts kept elsewhere than the store.
	Counter Counter
	// FloodKeep is the most replies of one peer under flood control kept
	// set aside (DefaultFloodKeep); Later drops the oldest beyond it.
	FloodKeep int
	// StatsEvery is the least time between two readings of a community's
	// length and oldest entry (default 5s); see Stats.
	StatsEvery time.Duration
	// Clock tells the time (default time.Now): when a takeover is due
	// (ClaimAfter), the due times of the replies set aside, and the ages
	// Stats reports. Redis's own clock still measures how long an entry
	// stayed idle with a consumer, and handouts how long a read is under
	// way (it is compared with that).
	Clock  func() time.Time
	Logger zerolog.Logger
}

// An Outbox is a durable reply queue. It is safe for concurrent use.
type Outbox struct {
	rdb      redis.UniversalClient
	opts     Options
	store    *freq.Store // Options.Store, or one of its own
	storeErr error       // why there is no store of its own: Init returns it
	log      zerolog.Logger
	redelivs atomic.Int64
	blockers blockers // connections of their own for reads that wait

	mu          sync.Mutex
	communities map[int]*community // guarded by mu; each has its own lock
	watch       statsWatch         // watchStats
}

// A community is this instance's state of one community's outbox.
type community struct {
	key      string      // the stream (Outbox.key), built once for the hot path
	queue    *freq.Queue // the stream as the store queues to it
	handouts handouts    // what is handed out: never an entry twice (its own lock)

	mu        sync.Mutex // guards the fields below
	lastClaim time.Time  // the last periodic recovery and takeover
	claimFrom string     // where a takeover under way goes on (an XAUTOCLAIM cursor); "" if none
	drain     drain      // how far Drain has gone
	reading   reading    // the last reading of the length, for Stats
	// laterDue is when a Take next looks at the later set (later.go):
	// its earliest due time as last read; zero: at once.
	laterDue   time.Time
	laterEmpty bool // the later set was empty at that reading
	// laterLooks counts the readings of the later set noted (noteDue): a
	// reading asked before another was noted may be the older of the two.
	laterLooks uint64
	parkedHeld map[string]struct{} // the later set's replies handed out and not finished
	mine       map[string]struct{} // the later set's replies this instance set aside, as far as it knows
}

// New returns an Outbox on rdb. A prefix its own store (Options.Store nil)
// refuses makes Init fail.
func New(rdb redis.UniversalClient, opts Options) *Outbox {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = DefaultMaxLen
	}
	if opts.ClaimAfter <= 0 {
		opts.ClaimAfter = DefaultClaimAfter
	}
	if opts.LaterIdle <= 0 {
		opts.LaterIdle = opts.ClaimAfter
	}
	if opts.Consumer == "" {
		host, _ := os.Hostname()
		opts.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8])
	}
	if opts.OnceFor <= 0 {
		opts.OnceFor = time.Hour
	}
	if opts.FloodKeep <= 0 {
		opts.FloodKeep = DefaultFloodKeep
	}
	if opts.StatsEvery <= 0 {
		opts.StatsEvery = 5 * time.Second
	}
	if opts.OnceFor < time.Second {
		opts.OnceFor = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	o := &Outbox{rdb: rdb, opts: opts, store: opts.Store, log: opts.Logger, communities: map[int]*community{}}
	if o.store == nil {
		_, cluster := rdb.(*redis.ClusterClient)
		o.store, o.storeErr = freq.New(rdb, freq.Options{Prefix: opts.Prefix, Cluster: cluster})
	}
	return o
}

// community returns the state of group, creating it.
func (o *Outbox) community(group int) *community {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.communities[group]
	if c == nil {
		k := o.key(group)
		q, err := freq.NewQueue(k, o.opts.MaxLen, o.opts.OnceFor)
		if err != nil {
			panic(err) // New made MaxLen and OnceFor valid
		}
		c = &community{key: k, queue: q}
		o.communities[group] = c
	}
	return c
}

// key is the stream of a community; the hash tag keeps it in one slot.
func (o *Outbox) key(group int) string {
	return o.opts.Prefix + keyPart + "{" + strconv.Itoa(group) + "}"
}

// Init creates the streams and the consumer group of the communities,
// removes the consumers of earlier processes that hold nothing and have
// been idle longer than ClaimAfter, takes a first reading for Stats and
// starts the watch that keeps it fresh while entries wait (see Stats); it
// checks the layout of the store's keys and sends Redis the scripts Record
// runs for every message (freq.Store.Load). It is idempotent.
func (o *Outbox) Init(ctx context.Context, groups ...int) error {
	if o.storeErr != nil {
		return fmt.Errorf("outbox: %w", o.storeErr)
	}
	if err := o.store.Load(ctx); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	for _, g := range groups {
		if err := o.createGroup(ctx, g); err != nil {
			return err
		}
		n, err := pruneScript.Run(ctx, o.rdb, []string{o.key(g)}, ConsumerGroup, o.opts.ClaimAfter.Milliseconds(), o.opts.Consumer).Int()
		if err != nil {
			return fmt.Errorf("outbox: remove idle consumers of community %d: %w", g, err)
		}
		if n > 0 {
			o.log.Info().Int("group_id", g).Int("consumers", n).Msg("outbox: removed idle consumers that held nothing")
		}
		o.refreshStats(ctx, g)
	}
	o.startWatch()
	return nil
}

func (o *Outbox) createGroup(ctx context.Context, group int) error {
	// "0": entries added before the group existed are delivered too.
	err := o.rdb.XGroupCreateMkStream(ctx, o.key(group), ConsumerGroup, "0").Err()
	if err != nil && !redisconn.IsError(err, "BUSYGROUP") {
		return fmt.Errorf("outbox: create consumer group for community %d: %w", group, err)
	}
	return nil
}

// errClosed is returned by a waiting Take after Close.
var errClosed = errors.New("outbox: closed")
