package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
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
	// Key is the reply key of the message answered (package msgkey): Add
	// keeps one reply per Key (Record one per dedupe key). Empty means the
	// message had nothing to identify it, and no such check is made. It is
	// not stored in the entry.
	Key string
	// Queued is when the reply entered the queue.
	Queued time.Time
	// QuoteCMID is the conversation_message_id of the message answered,
	// quoted with messages.send's forward parameter; 0 means no forward.
	QuoteCMID int
	// ReplyTo is the id of the message answered, quoted with reply_to
	// when there is no forward; 0 means none.
	ReplyTo int

	// The reply's retry state, kept with it while it is set aside (Later):
	// Tries counts its sends that failed for a reason that passes (VK's
	// transient errors, no answer), Unknown those VK answered with a code
	// the bot does not know, Flood those flood control refused; Due is
	// when it is to be sent again (zero: now). A new reply has none.
	Tries, Unknown, Flood int
	Due                   time.Time

	origin string // for a reply set aside: the stream id it was stored under
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

// Record counts one occurrence of textKey with Options.Store (or
// Options.Counter, then stores e with Add: two calls), once per
// dedupeKey, and stores e with the answer as its text, once per message
// (freq.Store.Record: one script run on a single server, whose record of
// the message serves both; two calls on a Redis Cluster); it answers as
// freq.Store.Count. A repeated call, or VK's re-delivery of the message,
// counts it once and stores one reply. A full outbox refuses a message
// whose reply is not stored yet with ErrFull; in one call nothing is
// counted, in two the message is counted (the error wraps ErrNotStored
// too), and its reply is stored when it comes again.
func (o *Outbox) Record(ctx context.Context, textKey, dedupeKey string, e Entry) (previous int64, duplicate bool, err error) {
	if o.opts.Counter != nil {
		previous, duplicate, err = o.opts.Counter.Count(ctx, textKey, dedupeKey)
		if err != nil {
			return 0, false, err
		}
		e.Message = strconv.FormatInt(previous, 10)
		a := o.newEntryArgs(e)
		if _, err := o.store.Queue(ctx, a.queue, dedupeKey, e.Message, a.fields); err != nil {
			return previous, duplicate, fmt.Errorf("%w: %w", ErrNotStored, o.full(err, "add", e.GroupID))
		}
		return previous, duplicate, nil
	}
	a := o.newEntryArgs(e)
	r, err := o.store.Record(ctx, &freq.Message{Text: textKey, Dedupe: dedupeKey, Queue: a.queue, Fields: a.fields})
	if errors.Is(err, freq.ErrNotQueued) {
		return r.Previous, r.Duplicate, fmt.Errorf("%w: %w", ErrNotStored, o.full(err, "record", e.GroupID))
	}
	return r.Previous, r.Duplicate, o.full(err, "record", e.GroupID)
}

// Add appends e to its community's outbox, unless an entry with the same
// non-empty e.Key was added within OnceFor (or up to twice as long): then
// nothing changes, so a message re-delivered any number of times, at once
// or later, is answered once. It stores a reply whose count is done:
// Record is how a message is recorded.
func (o *Outbox) Add(ctx context.Context, e Entry) error {
	a := o.newEntryArgs(e)
	_, err := o.store.Queue(ctx, a.queue, e.Key, e.Message, a.fields)
	return o.full(err, "add", e.GroupID)
}

// full returns err, from the store's call of op that queues a reply to
// group, wrapped in ErrFull when it says the stream is full.
func (o *Outbox) full(err error, op string, group int) error {
	if errors.Is(err, freq.ErrFull) {
		return fmt.Errorf("%w: community %d: %w", ErrFull, group, err)
	}
	if err != nil {
		return fmt.Errorf("outbox: %s: %w", op, err)
	}
	return nil
}

// wakeField marks an entry earlier versions added to end waiting reads
// at shutdown: no reply, deleted by whoever reads it.
const wakeField = "wake"

// messageField is the entry field holding the reply's text, randomIDField
// the one holding its random_id, epochField its epoch (the store writes
// them).
const (
	messageField  = freq.EntryText
	randomIDField = freq.EntryRandomID
	epochField    = freq.EntryEpoch
)

// entryArgs holds what the store writes of one entry but its text and
// random_id: the community's queue and the entry's field/value pairs
// (fields); decodeEntry reads them back. The numbers are handed to
// go-redis by pointer, which it writes as their values: one allocation for
// them all where each number put in an interface costs one.
type entryArgs struct {
	e      Entry
	queued int64 // e.Queued in Unix milliseconds
	queue  *freq.Queue
	all    [10]any
	fields []any // all, or all but the quote's pairs when e quotes nothing
}

// newEntryArgs returns e's entryArgs. A reply that quotes nothing (most:
// every reply in a private chat) leaves the quote's fields out, which
// decodeEntry reads as zero: two pairs fewer for Redis to store in the
// stream and hand to the sender.
func (o *Outbox) newEntryArgs(e Entry) *entryArgs {
	a := &entryArgs{e: e, queued: e.Queued.UnixMilli(), queue: o.community(e.GroupID).queue}
	a.all = [...]any{"g", &a.e.GroupID, "p", &a.e.PeerID, "q", &a.queued, "c", &a.e.QuoteCMID, "t", &a.e.ReplyTo}
	a.fields = a.all[:]
	if e.QuoteCMID == 0 && e.ReplyTo == 0 {
		a.fields = a.all[:6]
	}
	return a
}

// decodeEntry reads back a stream entry the store wrote (freq's
// reply.lua), and the epoch of its random_id (0 in an entry of a build
// before entries carried it). Every entry carries its random_id, so a
// reply keeps the one it was stored with.
func decodeEntry(m redis.XMessage) (Entry, int64, error) {
	var errs []error
	num := func(k string) int64 {
		s, _ := m.Values[k].(string)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %s: %q", k, s))
		}
		return v
	}
	e := Entry{ID: m.ID, GroupID: int(num("g")), PeerID: int(num("p")), RandomID: int32(num(randomIDField)),
		Queued: time.UnixMilli(num("q"))}
	e.Message, _ = m.Values[messageField].(string)
	if _, quoted := m.Values["c"]; quoted { // absent when the reply quotes nothing
		e.QuoteCMID, e.ReplyTo = int(num("c")), int(num("t"))
	}
	var epoch int64
	if _, ok := m.Values[epochField]; ok {
		epoch = num(epochField)
	}
	if e.Message == "" {
		errs = append(errs, errors.New("empty message"))
	}
	return e, epoch, errors.Join(errs...)
}
