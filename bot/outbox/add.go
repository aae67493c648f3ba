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
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// An Entry is one reply in the outbox: what to send, to whom, and what
// identifies it. The bot's Reply has the same fields, in the same order,
// so the bot converts one into the other.
type Entry struct {
	// ID is the entry's stream id; empty until it is stored (Add ignores it).
	ID       string
	GroupID  int
	PeerID   int
	Message  string // the reply's text
	RandomID int32
	// Key is the reply key of the message answered (package msgkey): the
	// outbox keeps one reply per Key. Empty means the message had nothing to identify it,
	// and no such check is made. It is not stored in the entry.
	Key string
	// Queued is when the reply entered the queue.
	Queued time.Time
	// QuoteCMID and ReplyTo are the quote of the message answered
	// (messages.send's forward and reply_to); 0 means none.
	QuoteCMID int
	ReplyTo   int
}

// ErrFull is returned by Add when the community's outbox holds MaxLen replies.
var ErrFull = errors.New("outbox: full")

// Add appends e to its community's outbox, unless an entry with the same
// non-empty e.Key was added within OnceFor: then nothing changes, so a
// message re-delivered any number of times, at once or later, is answered
// once.
func (o *Outbox) Add(ctx context.Context, e Entry) error {
	keys := []string{o.key(e.GroupID)}
	if e.Key != "" {
		keys = append(keys, o.onceKey(e.GroupID, e.Key))
	}
	args := append([]any{o.opts.MaxLen, o.opts.OnceFor.Milliseconds(), messageField, e.Message}, newEntryArgs(e).fields[:]...)
	err := addScript.Exec(ctx, o.rdb, keys, args).Err()
	if redisconn.IsError(err, "OUTBOX_FULL") {
		return fmt.Errorf("%w: community %d has %s replies waiting", ErrFull, e.GroupID, strings.TrimPrefix(err.Error(), "OUTBOX_FULL "))
	}
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	return nil
}

// onceKey is the key that remembers the reply to the reply key of group;
// it shares the stream's hash tag. A key longer than freq.MaxDedupeKey (an
// event_id may be of any length) is written as its hash, as the count's
// dedupe keys are; shorter ones as they are, as before.
func (o *Outbox) onceKey(group int, key string) string {
	return o.key(group) + ":once:" + freq.KeyPart(key)
}

// A Recorder counts messages with a freq.Store and stores their replies in
// an Outbox in one script run per message: one Redis call instead of two.
// The count's keys and the outbox stream must be on one server, so it is
// for a single Redis server, not a cluster.
type Recorder struct {
	counts *freq.Store
	o      *Outbox
}

// Recorder returns a Recorder counting with counts into this outbox.
func (o *Outbox) Recorder(counts *freq.Store) *Recorder { return &Recorder{counts: counts, o: o} }

// Record counts one occurrence of textKey, once per dedupeKey (see
// freq.Store.Count), and stores e with the answer as its text, at once;
// the entry is stored once per dedupe key (see freq.Store.CountThen). A
// full outbox refuses a new message with ErrFull, and nothing is counted.
func (rec *Recorder) Record(ctx context.Context, textKey, dedupeKey string, e Entry) (previous int64, duplicate bool, err error) {
	a := newEntryArgs(e)
	a.then = freq.Then{Stream: rec.o.community(e.GroupID).key, MaxLen: rec.o.opts.MaxLen, Field: messageField, Fields: a.fields[:]}
	previous, duplicate, err = rec.counts.CountThen(ctx, textKey, dedupeKey, &a.then)
	if errors.Is(err, freq.ErrStreamFull) {
		err = fmt.Errorf("%w: community %d: %w", ErrFull, e.GroupID, err)
	}
	return previous, duplicate, err
}

// wakeField marks an entry earlier versions added to end waiting reads
// at shutdown: no reply, deleted by whoever reads it.
const wakeField = "wake"

// messageField is the entry field holding the reply's text.
const messageField = "m"

// entryArgs holds the arguments of one entry's store: fields are the
// field/value pairs of e's stream entry, but for its text (messageField);
// decodeEntry reads them back. The numbers are handed to go-redis by
// pointer, which it writes as their values: one allocation for them all
// (and Record's count, then) where each number put in an interface costs
// one.
type entryArgs struct {
	e      Entry
	queued int64 // e.Queued in Unix milliseconds
	fields [12]any
	then   freq.Then
}

// newEntryArgs returns e's entryArgs, with then left for Record to fill.
func newEntryArgs(e Entry) *entryArgs {
	a := &entryArgs{e: e, queued: e.Queued.UnixMilli()}
	a.fields = [...]any{"g", &a.e.GroupID, "p", &a.e.PeerID, "r", &a.e.RandomID, "q", &a.queued, "c", &a.e.QuoteCMID, "t", &a.e.ReplyTo}
	return a
}

// decodeEntry reads back a stream entry written by Add or Record.
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
