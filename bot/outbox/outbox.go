// Package outbox keeps the bot's replies durably in Redis from before the
// webhook answers "ok" until VK accepted them.
//
// Each community has one Redis Stream with one consumer group. Add appends
// a reply; Take hands out new entries to this instance's consumer and takes
// over entries another consumer (a dead or stuck instance) has held longer
// than ClaimAfter; Done acknowledges and deletes entries, so the stream only
// ever holds replies not yet accepted by VK. While an instance shuts down,
// Drain hands out only what it still has to finish, and Release gives back
// what it could not, for the other instances to send at once. A reply may
// be handed out twice (after a crash between the send and Done); the
// reply's deterministic random_id makes VK deliver it once.
package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// ConsumerGroup is the name of the stream consumer group every instance joins.
const ConsumerGroup = "senders"

// DefaultPrefix is the service's base prefix when Options.Prefix is
// empty; every key starts with the base prefix followed by keyPart.
const DefaultPrefix = "vkc:"

// keyPart follows the base prefix in every key of the outbox.
const keyPart = "o:"

// ErrFull is returned by Add when the community's outbox holds MaxLen replies.
var ErrFull = errors.New("outbox: full")

//go:embed add.lua
var addLua string

//go:embed reading.lua
var readingLib string

//go:embed stats.lua
var statsLua string

//go:embed prune.lua
var pruneLua string

//go:embed done.lua
var doneLua string

//go:embed recover.lua
var recoverLua string

//go:embed release.lua
var releaseLua string

var (
	addScript     = redis.NewScript(addLua)
	statsScript   = redis.NewScript(readingLib + statsLua)
	pruneScript   = redis.NewScript(pruneLua)
	doneScript    = redis.NewScript(readingLib + doneLua)
	recoverScript = redis.NewScript(recoverLua)
	releaseScript = redis.NewScript(releaseLua)
)

// errClosed is returned by a waiting Take after Close.
var errClosed = errors.New("outbox: closed")

// recoverMargin is added to the age of the oldest read under way when
// recoverOwn picks the entries it hands out: an entry delivered to that
// read is younger, even counting the time recoverOwn's own call takes to
// reach Redis.
const recoverMargin = time.Second

// releaseBatch is the most pending entries Release looks at in one call.
const releaseBatch = 1000

// Options configure an Outbox. Zero fields mean the defaults.
type Options struct {
	// Prefix is the service's base prefix (default DefaultPrefix): every
	// key starts with it followed by "o:".
	Prefix string
	// MaxLen is the most replies waiting per community (default 100000).
	MaxLen int64
	// ClaimAfter is how long an entry may stay unacknowledged with another
	// consumer before this one takes it over (default 30s).
	ClaimAfter time.Duration
	// Consumer names this instance in the consumer group (default
	// hostname-pid-random). Two live instances must not share a name.
	Consumer string
	// OnceFor is how long Add remembers a message's reply after adding it
	// (default 1h, longer than VK keeps re-delivering an event).
	OnceFor time.Duration
	// StatsEvery is the least time between two readings of a community's
	// length and oldest entry (default 5s); see Stats.
	StatsEvery time.Duration
	Logger     zerolog.Logger
}

// An Outbox is a durable reply queue. It is safe for concurrent use.
type Outbox struct {
	rdb      redis.UniversalClient
	opts     Options
	log      zerolog.Logger
	redelivs atomic.Int64

	mu        sync.Mutex                  // guards every field below
	lastClaim map[int]time.Time           // last periodic recovery and takeover per community
	claimFrom map[int]string              // where a takeover under way goes on (an XAUTOCLAIM cursor), per community
	held      map[int]map[string]struct{} // per community, the ids handed out and not yet Done or released
	// Per community, the recoveries under way (recoverOwn) and the ids
	// finished by Done while one was: a recovery whose script ran before
	// that Done's acknowledgement may return such an entry after it is no
	// longer held, and must not hand it out again.
	recovering map[int]int
	doneDuring map[int]map[string]struct{}
	lostRead   map[int]bool                 // a read of the community failed: its answer may be lost
	reads      map[int]map[uint64]time.Time // per community, when each read under way began (see beginRead)
	readSeq    uint64                       // numbers the reads in reads
	drains     map[int]*drain               // per community, the state of Drain
	stats      map[int]*reading             // the last reading of each community's length
	blockers   map[string][]*redis.Client   // idle connections for waiting reads, by server address
	live       map[*redis.Client]struct{}   // every such connection open, idle or in use
	hooks      []redis.Hook                 // added to every blocker (AddHook)
	closed     bool                         // Close was called
}

// A drain is how far Drain has gone with one community.
type drain struct {
	began   bool   // the horizon is read
	horizon string // the id of the newest entry when the drain began; "" if none
	newDone bool   // no entry up to horizon is left unread by the group
}

// A reading is what Stats reports of one community, and when it was read.
type reading struct {
	length  int64
	oldest  time.Time // when the oldest entry was added; zero if none
	at      time.Time // when this was read; zero if never
	busy    bool      // entries were handed out since: read again when due
	reading bool      // a refresh is under way
}

var _ bot.Outbox = (*Outbox)(nil)

// New returns an Outbox on rdb.
func New(rdb redis.UniversalClient, opts Options) *Outbox {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = 100000
	}
	if opts.ClaimAfter <= 0 {
		opts.ClaimAfter = 30 * time.Second
	}
	if opts.Consumer == "" {
		host, _ := os.Hostname()
		opts.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8])
	}
	if opts.OnceFor <= 0 {
		opts.OnceFor = time.Hour
	}
	if opts.StatsEvery <= 0 {
		opts.StatsEvery = 5 * time.Second
	}
	return &Outbox{rdb: rdb, opts: opts, log: opts.Logger, lastClaim: map[int]time.Time{}, claimFrom: map[int]string{},
		held: map[int]map[string]struct{}{}, recovering: map[int]int{}, doneDuring: map[int]map[string]struct{}{}, lostRead: map[int]bool{}, reads: map[int]map[uint64]time.Time{},
		drains: map[int]*drain{}, stats: map[int]*reading{}, blockers: map[string][]*redis.Client{},
		live: map[*redis.Client]struct{}{}}
}

// key is the stream of a community; the hash tag keeps it in one slot.
func (o *Outbox) key(group int) string {
	return o.opts.Prefix + keyPart + "{" + strconv.Itoa(group) + "}"
}

// Init creates the streams and the consumer group of the communities,
// removes the consumers of earlier processes that hold nothing and have
// been idle longer than ClaimAfter, and takes a first reading for Stats.
// It is idempotent.
func (o *Outbox) Init(ctx context.Context, groups ...int) error {
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

// Add appends r to its community's outbox, unless a reply with the same
// non-empty r.Key was added within OnceFor: then nothing changes, so a
// message re-delivered any number of times, at once or later, is answered
// once.
func (o *Outbox) Add(ctx context.Context, r bot.Reply) error {
	keys := []string{o.key(r.GroupID)}
	if r.Key != "" {
		keys = append(keys, o.onceKey(r.GroupID, r.Key))
	}
	args := append([]any{o.opts.MaxLen, o.opts.OnceFor.Milliseconds(), messageField, r.Message}, entryFields(r)...)
	err := addScript.Run(ctx, o.rdb, keys, args...).Err()
	if redisconn.IsError(err, "OUTBOX_FULL") {
		return fmt.Errorf("%w: community %d has %s replies waiting", ErrFull, r.GroupID, strings.TrimPrefix(err.Error(), "OUTBOX_FULL "))
	}
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	return nil
}

// wakeField marks an entry earlier versions added to end waiting reads
// at shutdown: no reply, deleted by whoever reads it.
const wakeField = "wake"

// messageField is the entry field holding the reply's text.
const messageField = "m"

// entryFields are the field/value pairs of r's stream entry, but for its
// text (messageField); decodeReply reads them back.
func entryFields(r bot.Reply) []any {
	return []any{"g", r.GroupID, "p", r.PeerID, "r", r.RandomID, "q", r.Queued.UnixMilli(), "c", r.QuoteCMID, "t", r.ReplyTo}
}

// A Recorder counts messages with a freq.Store and stores their replies in
// an Outbox in one script run per message: one Redis call instead of two.
// The count's keys and the outbox stream must be on one server, so it is
// for a single Redis server, not a cluster. It meets bot.Recorder.
type Recorder struct {
	counts *freq.Store
	o      *Outbox
}

var _ bot.Recorder = (*Recorder)(nil)

// Recorder returns a Recorder counting with counts into this outbox.
func (o *Outbox) Recorder(counts *freq.Store) *Recorder { return &Recorder{counts: counts, o: o} }

// Record counts the message identified by identity and dedupe and stores
// r with the answer as its text, at once; the reply is stored once per
// dedupe key (see freq.Store.CountThen). A full outbox refuses a new
// message with ErrFull, and nothing is counted.
func (rec *Recorder) Record(ctx context.Context, identity, dedupe string, r bot.Reply) (previous int64, duplicate bool, err error) {
	previous, duplicate, err = rec.counts.CountThen(ctx, identity, dedupe, freq.Then{Stream: rec.o.key(r.GroupID), MaxLen: rec.o.opts.MaxLen,
		Field: messageField, Fields: entryFields(r)})
	if errors.Is(err, freq.ErrStreamFull) {
		err = fmt.Errorf("%w: community %d: %w", ErrFull, r.GroupID, err)
	}
	return previous, duplicate, err
}

// onceKey is the key that remembers the reply to the message key of group;
// it shares the stream's hash tag. A key longer than freq.MaxDedupeKey (an
// event_id may be of any length) is written as its hash, as the count's
// dedupe keys are; shorter ones as they are, as before.
func (o *Outbox) onceKey(group int, key string) string {
	return o.key(group) + ":once:" + freq.KeyPart(key)
}

// Take returns up to n replies of group for this instance to send: first
// entries other consumers held longer than ClaimAfter, then new entries,
// waiting up to wait for new ones (0: do not wait). An empty result with a
// nil error means there is nothing to send now.
//
// A wait ends when ctx does. Redis cannot cancel a read waiting for new
// entries, so a waiting Take reads on a connection of its own (one per
// waiting Take, kept for the next), which is closed to end the wait early.
func (o *Outbox) Take(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	out, err := o.take(ctx, group, n, wait)
	o.noteTaken(ctx, group, len(out))
	if err != nil {
		o.noteFailed(group)
	}
	return out, err
}

// noteFailed notes that a read of group failed: Redis may have handed
// entries to this consumer (a read, or a claim) with the answer lost on
// the way, so the next read looks for them.
func (o *Outbox) noteFailed(group int) {
	o.mu.Lock()
	o.lostRead[group] = true
	o.mu.Unlock()
}

func (o *Outbox) take(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	o.mu.Lock()
	periodic := time.Since(o.lastClaim[group]) >= o.opts.ClaimAfter
	if periodic {
		o.lastClaim[group] = time.Now()
		if o.claimFrom[group] == "" {
			o.claimFrom[group] = "0-0"
		}
	}
	claiming := o.claimFrom[group] != ""
	o.mu.Unlock()
	if out, _, err := o.recoverOwn(ctx, group, n, periodic); len(out) > 0 || err != nil {
		return out, err
	}
	if claiming {
		if out, err := o.reclaim(ctx, group, n); len(out) > 0 || err != nil {
			return out, err
		}
	}
	return o.readNew(ctx, group, n, wait)
}

// readNew reads up to n new entries of group, waiting up to wait for one.
func (o *Outbox) readNew(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	var c redis.Cmdable = o.rdb
	args := &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), ">"}, Count: int64(n), Block: wait}
	if wait <= 0 {
		args.Block = -1 // no BLOCK argument
	} else {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bc, err := o.blocker(ctx, group)
		if err != nil {
			return nil, err
		}
		if bc != nil {
			c = bc
			cut := context.AfterFunc(ctx, func() { bc.Close() })
			defer func() { o.putBlocker(bc, cut()) }()
		}
	}
	_, end := o.beginRead(group)
	defer end()
	streams, err := c.XReadGroup(ctx, args).Result()
	if redisconn.IsError(err, "NOGROUP") {
		// The stream was lost (a Redis without persistence restarted): recreate it.
		if err := o.createGroup(ctx, group); err != nil {
			return nil, err
		}
		streams, err = c.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the wait was ended by closing its connection
		}
		return nil, fmt.Errorf("outbox: read: %w", err)
	}
	return o.decode(ctx, group, messages(streams)), nil
}

func messages(streams []redis.XStream) []redis.XMessage {
	var msgs []redis.XMessage
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	return msgs
}

// beginRead notes that a call which may hand entries of group to this
// consumer (a read of new entries, a takeover, a recovery) begins now,
// until end is called, once the entries it returned are marked held. It
// returns how long an entry pending under this consumer must have been
// idle for no read then under way to have been handed it: 0 when none is
// under way, else the age of the oldest plus recoverMargin. recoverOwn
// hands out only entries that old, so it never hands out an entry that
// another read of this instance has just been given and is about to mark
// held (the entry is then pending, but not yet held).
func (o *Outbox) beginRead(group int) (minIdle time.Duration, end func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, began := range o.reads[group] {
		minIdle = max(minIdle, now.Sub(began)+recoverMargin)
	}
	if o.reads[group] == nil {
		o.reads[group] = map[uint64]time.Time{}
	}
	o.readSeq++
	mark := o.readSeq
	o.reads[group][mark] = now
	return minIdle, func() {
		o.mu.Lock()
		delete(o.reads[group], mark)
		o.mu.Unlock()
	}
}

// recoverOwn finds entries Redis handed to this consumer whose answer never
// arrived: a connection cut mid-reply, a wait ended by closing its
// connection, or a read the Redis client retried by itself after a
// failure, whose second answer hid the first. They are pending under this
// consumer's name, so no other read returns them and nobody else takes
// them before ClaimAfter. It hands out those this instance does not hold
// and no read under way may have been given (see beginRead) — at once after
// a failed Take (or always, when force is set), and every ClaimAfter
// (periodic) for the failures nobody saw. more reports that entries may be
// left: too young to tell, or more than n.
func (o *Outbox) recoverOwn(ctx context.Context, group, n int, force bool) (out []bot.Reply, more bool, err error) {
	o.mu.Lock()
	lost := o.lostRead[group]
	o.mu.Unlock()
	if !lost && !force {
		return nil, false, nil
	}
	minIdle, end := o.beginRead(group)
	defer end()
	o.mu.Lock()
	o.recovering[group]++
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		if o.recovering[group]--; o.recovering[group] == 0 {
			delete(o.recovering, group)
			delete(o.doneDuring, group)
		}
		o.mu.Unlock()
	}()
	o.mu.Lock()
	held := o.held[group]
	args := make([]any, 0, 5+len(held))
	args = append(args, ConsumerGroup, o.opts.Consumer, (minIdle + time.Millisecond - 1).Milliseconds(), n+len(held), n)
	for id := range held {
		args = append(args, id)
	}
	o.mu.Unlock()
	v, err := recoverScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Slice()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			return nil, false, nil // the read of new entries recreates it
		}
		return nil, false, fmt.Errorf("outbox: recover own pending: %w", err)
	}
	more, msgs, err := recovered(v)
	if err != nil {
		return nil, false, fmt.Errorf("outbox: recover own pending: %w", err)
	}
	out = o.decode(ctx, group, msgs)
	o.mu.Lock()
	o.lostRead[group] = more
	o.mu.Unlock()
	if len(out) > 0 {
		o.redelivs.Add(int64(len(out)))
		o.log.Warn().Int("group_id", group).Int("entries", len(out)).Msg("outbox: recovered replies whose read was lost")
	}
	return out, more, nil
}

// recovered takes recover.lua's reply apart: whether entries may be left,
// and the entries handed out.
func recovered(v []any) (left bool, msgs []redis.XMessage, err error) {
	if len(v) == 0 {
		return false, nil, errors.New("empty reply")
	}
	flag, ok := v[0].(int64)
	if !ok {
		return false, nil, fmt.Errorf("left: %T", v[0])
	}
	for _, e := range v[1:] {
		m, ok := entry(e)
		if !ok {
			continue // deleted meanwhile (Redis before 7 answers nil for it)
		}
		msgs = append(msgs, m)
	}
	return flag == 1, msgs, nil
}

// entry reads one stream entry from a script's reply, {id, {field, value, …}}.
func entry(v any) (redis.XMessage, bool) {
	e, ok := v.([]any)
	if !ok || len(e) != 2 {
		return redis.XMessage{}, false
	}
	id, ok := e[0].(string)
	fields, ok2 := e[1].([]any)
	if !ok || !ok2 || len(fields)%2 != 0 {
		return redis.XMessage{}, false
	}
	m := redis.XMessage{ID: id, Values: make(map[string]any, len(fields)/2)}
	for i := 0; i < len(fields); i += 2 {
		k, _ := fields[i].(string)
		m.Values[k] = fields[i+1]
	}
	return m, true
}

// reclaim takes over entries idle longer than ClaimAfter. Take starts it
// every ClaimAfter per community (so an idle outbox costs Redis next to
// nothing) and goes on with it in the following Takes, n entries at a
// time, until it has looked at every pending entry. Entries this instance
// still holds (a send being retried) are skipped, not handed out twice.
func (o *Outbox) reclaim(ctx context.Context, group, n int) ([]bot.Reply, error) {
	o.mu.Lock()
	from := o.claimFrom[group]
	o.mu.Unlock()
	if from == "" {
		return nil, nil // another Take finished it meanwhile
	}
	_, end := o.beginRead(group)
	defer end()
	msgs, next, err := o.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: o.key(group), Group: ConsumerGroup,
		Consumer: o.opts.Consumer, MinIdle: o.opts.ClaimAfter, Start: from, Count: int64(n)}).Result()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			o.mu.Lock()
			o.claimFrom[group] = ""
			o.mu.Unlock()
			return nil, nil // Take's read recreates it
		}
		return nil, fmt.Errorf("outbox: reclaim: %w", err)
	}
	if next == "0-0" {
		next = "" // done: the next takeover starts again in ClaimAfter
	}
	o.mu.Lock()
	o.claimFrom[group] = next
	o.mu.Unlock()
	out := o.decode(ctx, group, msgs)
	if len(out) > 0 {
		o.redelivs.Add(int64(len(out)))
		o.log.Warn().Int("group_id", group).Int("entries", len(out)).Msg("outbox: took over replies another sender held too long")
	}
	return out, nil
}

// decode turns entries into replies and marks them held, in one critical
// section with the check that they are not held already: an entry two
// calls of this instance were given (a recovery, and a read under way) is
// handed out by one of them only. An entry that does not decode cannot
// ever be sent: it is logged and deleted.
func (o *Outbox) decode(ctx context.Context, group int, msgs []redis.XMessage) []bot.Reply {
	out := make([]bot.Reply, 0, len(msgs))
	var bad []string
	o.mu.Lock()
	held := o.heldOf(group)
	for _, m := range msgs {
		if _, ok := held[m.ID]; ok {
			continue
		}
		if _, ok := o.doneDuring[group][m.ID]; ok {
			continue // sent and finished by another sender of this instance
		}
		if _, ok := m.Values[wakeField]; ok {
			bad = append(bad, m.ID) // no reply: left by an earlier version's shutdown
			continue
		}
		r, err := decodeReply(m)
		if err != nil {
			o.log.Error().Err(err).Str("id", m.ID).Msg("outbox: undecodable entry deleted")
			bad = append(bad, m.ID)
			continue
		}
		held[m.ID] = struct{}{}
		out = append(out, r)
	}
	o.mu.Unlock()
	if len(bad) > 0 {
		o.Done(ctx, group, bad...)
	}
	return out
}

func decodeReply(m redis.XMessage) (bot.Reply, error) {
	var errs []error
	num := func(k string) int64 {
		s, _ := m.Values[k].(string)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %s: %q", k, s))
		}
		return v
	}
	r := bot.Reply{ID: m.ID, GroupID: int(num("g")), PeerID: int(num("p")), RandomID: int32(num("r")),
		Queued: time.UnixMilli(num("q"))}
	r.Message, _ = m.Values[messageField].(string)
	if _, quoted := m.Values["c"]; quoted { // absent from entries stored before quotes
		r.QuoteCMID, r.ReplyTo = int(num("c")), int(num("t"))
	}
	if r.Message == "" {
		errs = append(errs, errors.New("empty message"))
	}
	return r, errors.Join(errs...)
}

// Done acknowledges and deletes entries of group: VK accepted or refused
// them for good. The same call reads group's outbox afresh for Stats.
func (o *Outbox) Done(ctx context.Context, group int, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, ConsumerGroup)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := doneScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Slice()
	// The entries stay held until the acknowledgement's outcome is known,
	// so that a recovery meanwhile cannot hand them out. Acknowledged
	// while a recovery is under way, they are remembered until it ends
	// (see decode); not acknowledged, they are left to be recovered.
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		delete(o.held[group], id)
		if err == nil && o.recovering[group] > 0 {
			if o.doneDuring[group] == nil {
				o.doneDuring[group] = map[string]struct{}{}
			}
			o.doneDuring[group][id] = struct{}{}
		}
	}
	if err != nil {
		return fmt.Errorf("outbox: done: %w", err)
	}
	o.reading(group).set(v)
	return nil
}

// Drain returns up to n replies of group that this instance is still to
// send while it shuts down, without waiting: first the entries Redis handed
// to it whose answer was lost (see recoverOwn), then the new entries stored
// before the first Drain of group, the horizon. Newer entries are left to
// the other instances; any that a read returns past the horizon are handed
// back at once (see Release). done reports that nothing is left for this
// instance to drain of group beyond what it holds; none and done false
// mean that entries may come due shortly: call again.
func (o *Outbox) Drain(ctx context.Context, group, n int) (out []bot.Reply, done bool, err error) {
	defer func() {
		if err != nil {
			o.noteFailed(group)
		}
	}()
	d, err := o.drainOf(ctx, group)
	if err != nil {
		return nil, false, err
	}
	out, more, err := o.recoverOwn(ctx, group, n, true)
	if len(out) > 0 || err != nil {
		return out, false, err
	}
	o.mu.Lock()
	newDone := d.newDone
	o.mu.Unlock()
	if newDone {
		return nil, !more, nil
	}
	out, err = o.readUpTo(ctx, group, n, d)
	return out, false, err
}

// drainOf returns group's drain, reading its horizon on the first call.
func (o *Outbox) drainOf(ctx context.Context, group int) (*drain, error) {
	o.mu.Lock()
	d := o.drains[group]
	if d == nil {
		d = &drain{}
		o.drains[group] = d
	}
	began := d.began
	o.mu.Unlock()
	if began {
		return d, nil
	}
	last, err := o.rdb.XRevRangeN(ctx, o.key(group), "+", "-", 1).Result()
	if err != nil {
		return nil, fmt.Errorf("outbox: read the newest entry: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !d.began {
		d.began = true
		if len(last) > 0 {
			d.horizon = last[0].ID
		} else {
			d.newDone = true
		}
	}
	return d, nil
}

// readUpTo reads up to n new entries of group and hands out those up to
// d's horizon; the others it hands back. Once the group has delivered an
// entry past the horizon, or fewer than n, every entry up to it is read.
func (o *Outbox) readUpTo(ctx context.Context, group, n int, d *drain) ([]bot.Reply, error) {
	_, end := o.beginRead(group)
	defer end()
	streams, err := o.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), ">"}, Count: int64(n), Block: -1}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		if redisconn.IsError(err, "NOGROUP") {
			err = nil // the stream was lost: nothing to drain
		} else {
			return nil, fmt.Errorf("outbox: read: %w", err)
		}
	}
	msgs := messages(streams)
	var mine []redis.XMessage
	var past []string
	o.mu.Lock()
	held := o.heldOf(group)
	for _, m := range msgs {
		switch _, isHeld := held[m.ID]; {
		case compareIDs(m.ID, d.horizon) <= 0:
			mine = append(mine, m)
		case !isHeld:
			// Held while it is handed back, so that a recovery meanwhile
			// cannot hand it out too.
			held[m.ID] = struct{}{}
			past = append(past, m.ID)
		}
	}
	o.mu.Unlock()
	if len(past) > 0 || len(msgs) < n {
		o.mu.Lock()
		d.newDone = true
		o.mu.Unlock()
	}
	if len(past) > 0 {
		_, _, err := o.release(ctx, group, past...)
		o.mu.Lock()
		for _, id := range past {
			delete(o.held[group], id)
		}
		o.mu.Unlock()
		if err != nil {
			o.log.Warn().Err(err).Int("group_id", group).Int("entries", len(past)).
				Msg("outbox: cannot hand back replies read past the drain; they are taken over after OUTBOX_CLAIM_AFTER")
		}
	}
	return o.decode(ctx, group, mine), nil
}

// compareIDs compares two stream entry ids ("ms-seq") as Redis orders them.
func compareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	if am != bm {
		return cmp.Compare(am, bm)
	}
	return cmp.Compare(as, bs)
}

func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// Release hands back every entry of group this instance took and has not
// finished with Done — those it holds and those whose read it lost — as
// new entries, which any instance reads at once instead of taking them
// over after ClaimAfter. A shutting-down instance calls it for what its
// deadline left unsent; a send of one of them still under way may then be
// repeated by another instance (VK delivers one message per random_id).
// It returns how many entries were handed back.
func (o *Outbox) Release(ctx context.Context, group int) (int, error) {
	total := 0
	for {
		released, looked, err := o.release(ctx, group)
		total += released
		if err != nil {
			return total, err
		}
		if looked < releaseBatch {
			break
		}
	}
	o.mu.Lock()
	delete(o.held, group)
	o.mu.Unlock()
	if total > 0 {
		o.log.Info().Int("group_id", group).Int("entries", total).Msg("outbox: handed back replies not sent, for the other instances")
	}
	return total, nil
}

// release runs release.lua for ids of group, or for every entry pending
// under this consumer (up to releaseBatch) when there are none.
func (o *Outbox) release(ctx context.Context, group int, ids ...string) (released, looked int, err error) {
	args := make([]any, 0, 3+len(ids))
	args = append(args, ConsumerGroup, o.opts.Consumer, releaseBatch)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := releaseScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Int64Slice()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			return 0, 0, nil // the stream was lost: nothing to hand back
		}
		return 0, 0, fmt.Errorf("outbox: release: %w", err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("outbox: release: reply %v", v)
	}
	return int(v[0]), int(v[1]), nil
}

// blocker returns a client of its own (one connection) for a read of group
// that waits, or nil when the client given to New is neither a
// *redis.Client nor a *redis.ClusterClient (that read then cannot be
// ended early). Give it back with putBlocker.
func (o *Outbox) blocker(ctx context.Context, group int) (*redis.Client, error) {
	var server *redis.Client
	switch c := o.rdb.(type) {
	case *redis.Client:
		server = c
	case *redis.ClusterClient:
		var err error
		if server, err = c.MasterForKey(ctx, o.key(group)); err != nil {
			return nil, fmt.Errorf("outbox: find the server of community %d: %w", group, err)
		}
	default:
		return nil, nil
	}
	opt := *server.Options()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, errClosed
	}
	if free := o.blockers[opt.Addr]; len(free) > 0 {
		bc := free[len(free)-1]
		o.blockers[opt.Addr] = free[:len(free)-1]
		return bc, nil
	}
	opt.PoolSize, opt.MaxActiveConns, opt.MinIdleConns, opt.MaxIdleConns = 1, 1, 0, 1
	// Options() holds go-redis's normalised values: "no retries" (-1)
	// reads 0 there, which NewClient would turn into 3 retries.
	opt.MaxRetries = -1
	opt.PushNotificationProcessor = nil // the new client's own, not server's
	bc := redis.NewClient(&opt)
	for _, h := range o.hooks {
		bc.AddHook(h)
	}
	o.live[bc] = struct{}{}
	return bc, nil
}

// putBlocker keeps bc for the next waiting read, or closes it when it is
// not reusable (its wait was ended by closing it) or the outbox is closed.
func (o *Outbox) putBlocker(bc *redis.Client, reusable bool) {
	if reusable {
		o.mu.Lock()
		if !o.closed {
			addr := bc.Options().Addr
			o.blockers[addr] = append(o.blockers[addr], bc)
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
	}
	o.mu.Lock()
	delete(o.live, bc)
	o.mu.Unlock()
	bc.Close()
}

// AddHook adds h to the connections the outbox opens of its own, for
// reads that wait (see Take), present and future. Hooks of the client
// given to New see every other call.
func (o *Outbox) AddHook(h redis.Hook) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hooks = append(o.hooks, h)
	for bc := range o.live {
		bc.AddHook(h)
	}
}

// Close closes the connections the outbox opened of its own (see Take),
// which ends the waits under way; the client given to New stays open. A
// Take that waits fails after it.
func (o *Outbox) Close() error {
	o.mu.Lock()
	o.closed = true
	live := o.live
	o.blockers, o.live = map[string][]*redis.Client{}, map[*redis.Client]struct{}{}
	o.mu.Unlock()
	for bc := range live {
		bc.Close()
	}
	return nil
}

// Stats describes one community's outbox as last read.
type Stats struct {
	Length int64         // replies not yet accepted by VK
	Oldest time.Duration // age of the oldest of them, now
	// Age is how long ago Length and Oldest were read from Redis; -1 if
	// they never were.
	Age time.Duration
}

// Stats returns the last reading of group's outbox: its length and the age
// of its oldest entry. It makes no Redis call, so it answers at once
// whether Redis is up or not. Done reads it afresh with every batch of
// sent replies; Take reads it at most every StatsEvery while entries wait
// (VK down, say), and not at all while the outbox stays empty and idle.
func (o *Outbox) Stats(group int) Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	rd := o.stats[group]
	if rd == nil || rd.at.IsZero() {
		return Stats{Age: -1}
	}
	s := Stats{Length: rd.length, Age: time.Since(rd.at)}
	if !rd.oldest.IsZero() {
		s.Oldest = max(0, time.Since(rd.oldest))
	}
	return s
}

// Len reads from Redis how many replies group's outbox holds now.
func (o *Outbox) Len(ctx context.Context, group int) (int64, error) {
	n, err := o.rdb.XLen(ctx, o.key(group)).Result()
	if err != nil {
		return 0, fmt.Errorf("outbox: length: %w", err)
	}
	return n, nil
}

// noteTaken marks group as busy after a Take that handed out n entries and
// refreshes its reading when it is due.
func (o *Outbox) noteTaken(ctx context.Context, group, n int) {
	o.mu.Lock()
	rd := o.reading(group)
	if n > 0 {
		rd.busy = true
	}
	due := !rd.reading && (rd.busy || rd.length > 0) && time.Since(rd.at) >= o.opts.StatsEvery
	if due {
		rd.reading = true
	}
	o.mu.Unlock()
	if due {
		o.refreshStats(ctx, group)
	}
}

// heldOf returns the ids of group this instance holds, creating the set.
// o.mu must be held.
func (o *Outbox) heldOf(group int) map[string]struct{} {
	held := o.held[group]
	if held == nil {
		held = map[string]struct{}{}
		o.held[group] = held
	}
	return held
}

// reading returns group's reading, creating it. o.mu must be held.
func (o *Outbox) reading(group int) *reading {
	rd := o.stats[group]
	if rd == nil {
		rd = &reading{}
		o.stats[group] = rd
	}
	return rd
}

// refreshStats reads group's length and oldest entry. A failure keeps the
// old reading, whose age then tells how stale it is.
func (o *Outbox) refreshStats(ctx context.Context, group int) {
	v, err := statsScript.Run(ctx, o.rdb, []string{o.key(group)}).Slice()
	o.mu.Lock()
	defer o.mu.Unlock()
	rd := o.reading(group)
	rd.reading = false
	if err == nil {
		rd.set(v)
	}
}

// set takes the reply of reading.lua, {length, oldest id}, as read now; a
// malformed reply changes nothing. o.mu must be held.
func (rd *reading) set(v []any) {
	if len(v) != 2 {
		return
	}
	n, _ := v[0].(int64)
	oldest, _ := v[1].(string)
	rd.length, rd.oldest, rd.at, rd.busy = n, time.Time{}, time.Now(), false
	if ms, err := strconv.ParseInt(strings.SplitN(oldest, "-", 2)[0], 10, 64); err == nil && oldest != "" {
		rd.oldest = time.UnixMilli(ms)
	}
}

// Redeliveries is how many entries this instance took over from others or
// recovered from lost reads.
func (o *Outbox) Redeliveries() int64 { return o.redelivs.Load() }

// Total sums the last readings of groups' outboxes (Stats of each): the
// total length, the oldest entry's age, and the age of the stalest reading
// (-1 if one was never read). It makes no Redis call.
func (o *Outbox) Total(groups ...int) Stats {
	var sum Stats
	for _, g := range groups {
		s := o.Stats(g)
		sum.Length += s.Length
		sum.Oldest = max(sum.Oldest, s.Oldest)
		if s.Age < 0 || sum.Age < 0 {
			sum.Age = -1
		} else {
			sum.Age = max(sum.Age, s.Age)
		}
	}
	return sum
}

// A Report is the outbox of some communities as /stats shows it: their
// last readings summed (see Total) and this instance's redeliveries.
type Report struct {
	Length        int64       `json:"length"`         // replies not yet accepted by VK
	OldestSeconds float64     `json:"oldest_seconds"` // age of the oldest of them
	Age           age.Seconds `json:"age_seconds"`    // how long ago they were read
	Redeliveries  int64       `json:"redeliveries"`   // see Redeliveries
}

// Report returns the Report of groups. It makes no Redis call.
func (o *Outbox) Report(groups ...int) Report {
	t := o.Total(groups...)
	return Report{Length: t.Length, OldestSeconds: t.Oldest.Seconds(), Age: age.Seconds(t.Age), Redeliveries: o.Redeliveries()}
}
