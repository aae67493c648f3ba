// Package outbox keeps the bot's replies durably in Redis from before the
// webhook answers "ok" until VK accepted them.
//
// Each community has one Redis Stream with one consumer group. Add appends
// a reply; Take hands out new entries to this instance's consumer and takes
// over entries another consumer (a dead or stuck instance) has held longer
// than ClaimAfter; Done acknowledges and deletes entries, so the stream only
// ever holds replies not yet accepted by VK. A reply may be handed out twice
// (after a crash between the send and Done); the reply's deterministic
// random_id makes VK deliver it once.
package outbox

import (
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

var (
	addScript   = redis.NewScript(addLua)
	statsScript = redis.NewScript(readingLib + statsLua)
	pruneScript = redis.NewScript(pruneLua)
	doneScript  = redis.NewScript(readingLib + doneLua)
)

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

	mu        sync.Mutex          // guards lastClaim, held, lostRead and stats
	lastClaim map[int]time.Time   // last periodic recovery and takeover per community
	held      map[string]struct{} // ids handed out by Take and not yet Done
	lostRead  map[int]bool        // a read of the community failed: its answer may be lost
	stats     map[int]*reading    // the last reading of each community's length
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
	return &Outbox{rdb: rdb, opts: opts, log: opts.Logger, lastClaim: map[int]time.Time{},
		held: map[string]struct{}{}, lostRead: map[int]bool{}, stats: map[int]*reading{}}
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

// wakeField marks an entry Wake adds: no reply, deleted when read.
const wakeField = "wake"

// Wake ends the reads of group's outbox that are waiting for new replies
// (Take with a wait), in every instance, by adding an entry that is no
// reply and is deleted by whoever reads it. A blocked read cannot be
// cancelled from the client side; Close uses this so that a sender waiting
// up to a long poll turns to draining at once. It returns the entry's id,
// for Done to remove it should nobody have read it.
func (o *Outbox) Wake(ctx context.Context, group int) (string, error) {
	id, err := o.rdb.XAdd(ctx, &redis.XAddArgs{Stream: o.key(group), Values: []any{wakeField, "1"}}).Result()
	if err != nil {
		return "", fmt.Errorf("outbox: wake: %w", err)
	}
	return id, nil
}

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
// it shares the stream's hash tag.
func (o *Outbox) onceKey(group int, key string) string {
	return o.key(group) + ":once:" + key
}

// Take returns up to n replies of group for this instance to send: first
// entries other consumers held longer than ClaimAfter, then new entries,
// waiting up to wait for new ones (0: do not wait). An empty result with a
// nil error means there is nothing to send now.
func (o *Outbox) Take(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	out, err := o.take(ctx, group, n, wait)
	o.noteTaken(ctx, group, len(out))
	if err != nil {
		// Redis may have handed entries to this consumer (a read, or a
		// claim) with the answer lost on the way: look for them next time.
		o.mu.Lock()
		o.lostRead[group] = true
		o.mu.Unlock()
	}
	return out, err
}

func (o *Outbox) take(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	o.mu.Lock()
	periodic := time.Since(o.lastClaim[group]) >= o.opts.ClaimAfter
	if periodic {
		o.lastClaim[group] = time.Now()
	}
	o.mu.Unlock()
	if out, err := o.recoverOwn(ctx, group, n, periodic); len(out) > 0 || err != nil {
		return out, err
	}
	if periodic {
		if out, err := o.reclaim(ctx, group, n); len(out) > 0 || err != nil {
			return out, err
		}
	}
	args := &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), ">"}, Count: int64(n), Block: wait}
	if wait <= 0 {
		args.Block = -1 // no BLOCK argument
	}
	streams, err := o.rdb.XReadGroup(ctx, args).Result()
	if redisconn.IsError(err, "NOGROUP") {
		// The stream was lost (a Redis without persistence restarted): recreate it.
		if err := o.createGroup(ctx, group); err != nil {
			return nil, err
		}
		streams, err = o.rdb.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
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

// recoverOwn finds entries Redis handed to this consumer whose answer never
// arrived: a connection cut mid-reply, or a read the Redis client retried
// by itself after a failure, whose second answer hid the first. They are
// pending under this consumer's name, so no other read returns them and
// nobody else takes them before ClaimAfter. It reads the consumer's own
// pending entries and hands out those it does not hold — at once after a
// failed Take, and every ClaimAfter (periodic) for the failures nobody saw.
func (o *Outbox) recoverOwn(ctx context.Context, group, n int, periodic bool) ([]bot.Reply, error) {
	o.mu.Lock()
	lost, held := o.lostRead[group], len(o.held)
	o.mu.Unlock()
	if !lost && !periodic {
		return nil, nil
	}
	streams, err := o.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: ConsumerGroup, Consumer: o.opts.Consumer,
		Streams: []string{o.key(group), "0"}, Count: int64(n + held), Block: -1}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		if redisconn.IsError(err, "NOGROUP") {
			return nil, nil // the read below recreates it
		}
		return nil, fmt.Errorf("outbox: read own pending: %w", err)
	}
	o.mu.Lock()
	var found []redis.XMessage
	for _, m := range messages(streams) {
		if _, mine := o.held[m.ID]; !mine && len(found) < n {
			found = append(found, m)
		}
	}
	o.lostRead[group] = len(found) == n // more may be left
	o.mu.Unlock()
	if len(found) > 0 {
		o.redelivs.Add(int64(len(found)))
		o.log.Warn().Int("group_id", group).Int("entries", len(found)).Msg("outbox: recovered replies whose read was lost")
	}
	return o.decode(ctx, group, found), nil
}

// reclaim takes over entries idle longer than ClaimAfter (Take runs it
// every ClaimAfter per community, so an idle outbox costs Redis next to
// nothing). Entries this instance still holds (a
// send being retried) are skipped, not handed out twice.
func (o *Outbox) reclaim(ctx context.Context, group, n int) ([]bot.Reply, error) {
	msgs, _, err := o.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: o.key(group), Group: ConsumerGroup,
		Consumer: o.opts.Consumer, MinIdle: o.opts.ClaimAfter, Start: "0-0", Count: int64(n)}).Result()
	if err != nil {
		if redisconn.IsError(err, "NOGROUP") {
			return nil, nil // Take's read recreates it
		}
		return nil, fmt.Errorf("outbox: reclaim: %w", err)
	}
	o.mu.Lock()
	fresh := msgs[:0]
	for _, m := range msgs {
		if _, mine := o.held[m.ID]; !mine {
			fresh = append(fresh, m)
		}
	}
	o.mu.Unlock()
	if len(fresh) > 0 {
		o.redelivs.Add(int64(len(fresh)))
		o.log.Warn().Int("group_id", group).Int("entries", len(fresh)).Msg("outbox: took over replies another sender held too long")
	}
	return o.decode(ctx, group, fresh), nil
}

// decode turns entries into replies and marks them held. An entry that does
// not decode cannot ever be sent: it is logged and deleted.
func (o *Outbox) decode(ctx context.Context, group int, msgs []redis.XMessage) []bot.Reply {
	out := make([]bot.Reply, 0, len(msgs))
	var bad []string
	o.mu.Lock()
	for _, m := range msgs {
		if _, ok := m.Values[wakeField]; ok {
			bad = append(bad, m.ID) // served its purpose: a blocked read returned
			continue
		}
		r, err := decodeReply(m)
		if err != nil {
			o.log.Error().Err(err).Str("id", m.ID).Msg("outbox: undecodable entry deleted")
			bad = append(bad, m.ID)
			continue
		}
		o.held[m.ID] = struct{}{}
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
	o.mu.Lock()
	for _, id := range ids {
		delete(o.held, id)
	}
	o.mu.Unlock()
	args := make([]any, 0, 1+len(ids))
	args = append(args, ConsumerGroup)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := doneScript.Run(ctx, o.rdb, []string{o.key(group)}, args...).Slice()
	if err != nil {
		return fmt.Errorf("outbox: done: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reading(group).set(v)
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
