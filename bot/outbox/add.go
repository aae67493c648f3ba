package outbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// An Entry is one reply in the outbox: what to send, to whom, and what
// identifies it. The bot queues and sends Entry values as they are.
type Entry struct {
	// ID is the entry's stream id; empty until it is stored (Add ignores it).
	ID      string
	GroupID int
	PeerID  int
	Message string // the reply's text
	// RandomID is messages.send's random_id: the community's next one when
	// the entry is stored (Add and Record set it, whatever it was), the
	// same for every retry of the reply by any instance.
	RandomID int32
	// Key is the reply key of the message answered (package msgkey): the
	// outbox keeps one reply per Key. Empty means the message had nothing to identify it,
	// and no such check is made. It is not stored in the entry.
	Key string
	// Queued is when the reply entered the queue.
	Queued time.Time
	// QuoteCMID is the conversation_message_id of the message answered,
	// quoted with messages.send's forward parameter; 0 means no forward.
	QuoteCMID int
	// ReplyTo is the id of the message answered, quoted with reply_to
	// when there is no forward; 0 means none.
	ReplyTo int
}

// Quoted reports whether e quotes the message it answers.
func (e Entry) Quoted() bool { return e.QuoteCMID > 0 || e.ReplyTo > 0 }

// ErrFull is returned by Add and Record when the community's outbox holds
// MaxLen replies.
var ErrFull = errors.New("outbox: full")

// ErrNotStored is wrapped by Record's error when the message was counted
// (previous and duplicate are the count's answer) but its reply was not
// stored: VK is to deliver it again, when the count answers duplicate and
// the reply is stored.
var ErrNotStored = errors.New("outbox: counted, reply not stored")

// A Counter counts one occurrence of a message's text key and answers how
// many earlier ones its window holds, once per non-empty dedupe key: a
// repeated key changes nothing and answers as the first time, with
// duplicate set. *freq.Store meets it.
type Counter interface {
	Count(ctx context.Context, textKey, dedupeKey string) (previous int64, duplicate bool, err error)
}

// Record counts one occurrence of textKey with Options.Counter, once per
// dedupeKey, and stores e with the answer as its text, once per e.Key (as
// Add does); it answers as the Counter. It is the one way a message is
// recorded: when the Counter is a *freq.Store counting in the outbox's own
// single Redis server, both happen in one script run, one Redis call;
// otherwise (a cluster, where the count's keys and the stream are in
// different slots) in two calls, the count then Add. Either way a
// repeated call, or VK's re-delivery of the message, counts it once and
// stores one reply. A full outbox refuses a message whose reply is not
// stored yet with ErrFull; in one call nothing is counted, in two the
// message is counted (the error wraps ErrNotStored too), and its reply is
// stored when it comes again.
func (o *Outbox) Record(ctx context.Context, textKey, dedupeKey string, e Entry) (previous int64, duplicate bool, err error) {
	if o.opts.Counter == nil {
		return 0, false, errors.New("outbox: Record without a Counter")
	}
	if o.counts == nil {
		previous, duplicate, err = o.opts.Counter.Count(ctx, textKey, dedupeKey)
		if err != nil {
			return 0, false, err
		}
		e.Message = strconv.FormatInt(previous, 10)
		if err := o.Add(ctx, e); err != nil {
			return previous, duplicate, fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		return previous, duplicate, nil
	}
	a := o.newEntryArgs(e)
	previous, duplicate, err = o.counts.CountWith(ctx, recordScript, textKey, dedupeKey, a.keys[:], a.args[1:]...)
	return previous, duplicate, o.full(err, "record", e.GroupID)
}

// Add appends e to its community's outbox, unless an entry with the same
// non-empty e.Key was added within OnceFor (or up to twice as long: see
// onceField): then nothing changes, so a message re-delivered any number
// of times, at once or later, is answered once. It stores a reply whose count is done: Record is how a message is
// recorded.
func (o *Outbox) Add(ctx context.Context, e Entry) error {
	a := o.newEntryArgs(e)
	err := addScript.Exec(ctx, o.rdb, a.keys[:], a.args[:]).Err()
	return o.full(err, "add", e.GroupID)
}

// full returns err, from the script of op that queues a reply to group,
// wrapped in ErrFull when it says the stream is full.
func (o *Outbox) full(err error, op string, group int) error {
	if redisconn.IsError(err, "OUTBOX_FULL") {
		var rerr redis.Error
		errors.As(err, &rerr)
		return fmt.Errorf("%w: community %d has %s replies waiting", ErrFull, group, strings.TrimPrefix(rerr.Error(), "OUTBOX_FULL "))
	}
	if err != nil {
		return fmt.Errorf("outbox: %s: %w", op, err)
	}
	return nil
}

// onceField is the field that remembers the reply to the reply key key in
// its community's once-hashes (queue.lua): onceFieldBytes bytes of its
// SHA-256, whatever its length, or "" for no key. Two messages of a
// community in one period share a field with probability 2^-96 per pair.
func onceField(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return string(sum[:onceFieldBytes])
}

// onceFieldBytes is the length of a once-field.
const onceFieldBytes = 12

// wakeField marks an entry earlier versions added to end waiting reads
// at shutdown: no reply, deleted by whoever reads it.
const wakeField = "wake"

// messageField is the entry field holding the reply's text (queue.lua
// writes it).
const messageField = "m"

// entryArgs holds the keys and arguments of one entry's store, as
// queue.lua reads them: the stream, the random_id sequence and the two
// once-hashes, and the text (add.lua's first argument), the stream's
// maximum, the once-hashes' period, where a new sequence begins, the
// once-field and the entry's other field/value pairs; decodeEntry reads
// them back. The numbers are handed to go-redis by pointer, which it
// writes as their values: one allocation for them all where each number
// put in an interface costs one.
type entryArgs struct {
	e      Entry
	queued int64 // e.Queued in Unix milliseconds
	start  int32
	field  string
	keys   [4]string
	args   [5 + 10]any
}

// newEntryArgs returns e's entryArgs.
func (o *Outbox) newEntryArgs(e Entry) *entryArgs {
	a := &entryArgs{e: e, queued: e.Queued.UnixMilli(), start: sequenceStart(), field: onceField(e.Key)}
	c := o.community(e.GroupID)
	a.keys = [...]string{c.key, c.seqKey, c.onceKeys[0], c.onceKeys[1]}
	a.args = [...]any{&a.e.Message, &o.opts.MaxLen, &o.onceSpan, &a.start, &a.field,
		"g", &a.e.GroupID, "p", &a.e.PeerID, "q", &a.queued, "c", &a.e.QuoteCMID, "t", &a.e.ReplyTo}
	return a
}

// sequenceStart returns where a community's random_id sequence begins if
// it has not: a random number of the signed 32-bit range, not 0, drawn
// anew for every store, so that a sequence lost with Redis's data begins
// again at a new random point.
func sequenceStart() int32 {
	if v := int32(rand.Uint32()); v != 0 {
		return v
	}
	return 1
}

// decodeEntry reads back a stream entry written by queue.lua. Every entry
// carries its random_id ("r"), those of earlier versions too (which
// derived it from the message key), so a reply keeps the one it was
// stored with.
func decodeEntry(m redis.XMessage) (Entry, error) {
	var errs []error
	num := func(k string) int64 {
		s, _ := m.Values[k].(string)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %s: %q", k, s))
		}
		return v
	}
	e := Entry{ID: m.ID, GroupID: int(num("g")), PeerID: int(num("p")), RandomID: int32(num("r")),
		Queued: time.UnixMilli(num("q"))}
	e.Message, _ = m.Values[messageField].(string)
	if _, quoted := m.Values["c"]; quoted { // absent from entries stored before quotes
		e.QuoteCMID, e.ReplyTo = int(num("c")), int(num("t"))
	}
	if e.Message == "" {
		errs = append(errs, errors.New("empty message"))
	}
	return e, errors.Join(errs...)
}
