package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
		if _, err := o.store.Queue(ctx, o.community(e.GroupID).queue, dedupeKey, e.Message, entryData(e)); err != nil {
			return previous, duplicate, fmt.Errorf("%w: %w", ErrNotStored, o.full(err, "add", e.GroupID))
		}
		return previous, duplicate, nil
	}
	r, err := o.store.Record(ctx, &freq.Message{Text: textKey, Dedupe: dedupeKey, Queue: o.community(e.GroupID).queue, Data: entryData(e)})
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
	_, err := o.store.Queue(ctx, o.community(e.GroupID).queue, e.Key, e.Message, entryData(e))
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

// entryData returns what the store writes of e but its text and random_id
// (freq.Message.Data): its group, peer, when it was queued (Unix
// milliseconds) and, when it quotes the message it answers, QuoteCMID and
// ReplyTo, as decimal numbers separated by commas; decodeEntry reads them
// back. A reply that quotes nothing (most: every reply in a private chat)
// leaves the quote's two numbers out, which decodeEntry reads as zero.
func entryData(e Entry) string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, int64(e.GroupID), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.PeerID), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Queued.UnixMilli(), 10)
	if e.QuoteCMID != 0 || e.ReplyTo != 0 {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(e.QuoteCMID), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(e.ReplyTo), 10)
	}
	return string(b)
}

// decodeEntry reads back a stream entry the store wrote (freq.EntryField:
// the data entryData wrote, the random_id, its epoch, the reply's text)
// and returns it with its epoch. Every entry carries its random_id, so a
// reply keeps the one it was stored with.
func decodeEntry(m redis.XMessage) (Entry, int64, error) {
	v, _ := m.Values[freq.EntryField].(string)
	data, rid, epoch, text, err := freq.ParseEntry(v)
	if err != nil {
		return Entry{}, 0, err
	}
	var n [5]int64
	parts := strings.Split(data, ",")
	if len(parts) != 3 && len(parts) != 5 {
		return Entry{}, 0, fmt.Errorf("outbox: entry data %.60q: %d numbers, want 3 or 5", data, len(parts))
	}
	for i, p := range parts {
		if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return Entry{}, 0, fmt.Errorf("outbox: entry data %.60q: %q", data, p)
		}
	}
	if text == "" {
		return Entry{}, 0, errors.New("outbox: entry with an empty message")
	}
	return Entry{ID: m.ID, GroupID: int(n[0]), PeerID: int(n[1]), Queued: time.UnixMilli(n[2]), QuoteCMID: int(n[3]), ReplyTo: int(n[4]),
		Message: text, RandomID: rid}, epoch, nil
}
