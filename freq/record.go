package freq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// EntryField is the one field of a queued reply's stream entry, written by
// reply.lua: "DATA RANDOM_ID EPOCH TEXT", the caller's data
// (Message.Data), the reply's random_id and its sequence's epoch, and its
// text, the message's answer. One field where each part had one costs
// Redis 4 % of the record script (BENCHMARKS.md, "Functions defined once,
// and the entry in one field"). ParseEntry reads it.
const EntryField = "d"

// ParseEntry reads the value of an entry's EntryField.
func ParseEntry(v string) (data string, randomID int32, epoch int64, text string, err error) {
	data, rest, ok1 := strings.Cut(v, " ")
	id, rest, ok2 := strings.Cut(rest, " ")
	ep, text, ok3 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !ok3 {
		return "", 0, 0, "", fmt.Errorf("freq: entry %.60q: not DATA RANDOM_ID EPOCH TEXT", v)
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil {
		return "", 0, 0, "", fmt.Errorf("freq: entry %.60q: random_id %q", v, id)
	}
	if epoch, err = strconv.ParseInt(ep, 10, 64); err != nil || epoch < 1 {
		return "", 0, 0, "", fmt.Errorf("freq: entry %.60q: epoch %q", v, ep)
	}
	return data, int32(n), epoch, text, nil
}

// ErrFull is wrapped by the error of Record and Queue when the queue holds
// its MaxLen entries and the reply is not queued yet.
var ErrFull = errors.New("freq: reply queue full")

// ErrNotQueued is wrapped by Record's error when the message was counted
// (the Recorded is the count's answer) but its reply was not queued: on a
// Redis Cluster, where they are two calls, the second failed. The message
// coming again is answered as a duplicate, and its reply queued then.
var ErrNotQueued = errors.New("freq: counted, reply not queued")

// A Queue is one community's reply queue in Redis: a stream of entries,
// two state hashes by turns (the messages' records, the random_id
// sequence: see reply.lua) and the sequence's key, all in the stream's
// slot. It also keeps this process's mark of the newest random_id it saw
// given out, apart from Redis's data, so that a sequence gone back in
// time (a restored snapshot, a promoted replica that missed writes) moves
// on to a new random point rather than give out ids VK has seen. Make one
// with NewQueue per community and process; it is safe for concurrent use.
type Queue struct {
	keys [4]string // the stream, the even and odd state hashes, the sequence
	// The state hashes' period in seconds and the most entries, as script
	// arguments boxed once.
	spanArg, maxLenArg any

	mu        sync.Mutex
	markEpoch int64 // 0: none seen yet
	markID    int32
}

// NewQueue returns the queue whose stream is the key stream (its
// state keys are named after it) holding at most maxLen entries, whose
// records last period at least (whole seconds, rounded up; at most twice
// as long).
func NewQueue(stream string, maxLen int64, period time.Duration) (*Queue, error) {
	if maxLen < 1 || period < time.Second {
		return nil, fmt.Errorf("%w: queue of %d entries, period %v", ErrInvalid, maxLen, period)
	}
	return &Queue{keys: [4]string{stream, stream + ":s0", stream + ":s1", stream + ":rid"}, maxLenArg: strconv.FormatInt(maxLen, 10),
		spanArg: strconv.FormatInt(int64((period+time.Second-1)/time.Second), 10)}, nil
}

// Stream returns the queue's stream key.
func (q *Queue) Stream() string { return q.keys[0] }

// mark returns the newest random_id seen and its epoch (reply.lua's
// ARGV[5] and ARGV[6]); epoch 0 when none.
func (q *Queue) mark() (epoch, id int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.markEpoch, int64(q.markID)
}

// Saw notes a random_id given out at epoch, when it is newer than the
// mark. Record and Queue note those they give out; a sender notes those it
// reads back (EntryEpoch, EntryRandomID), so that a reply whose Record
// answer was lost, read and sent before a failover lost its writes, still
// moves the mark on: the promoted replica's sequence, behind it, then
// begins a new epoch rather than give the reply's random_id to another.
func (q *Queue) Saw(epoch int64, id int32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if epoch > q.markEpoch || epoch == q.markEpoch && uint32(id)-uint32(q.markID)-1 < 1<<31-1 {
		q.markEpoch, q.markID = epoch, id
	}
}

// A Message is what Record records: one occurrence of Text, once per
// Dedupe, and its reply queued in Queue with the answer as its text.
type Message struct {
	Text string // what is counted: the bot's text key
	// Dedupe identifies the message: the same Dedupe within the dedupe TTL
	// is recorded once. Empty means nothing identifies it: it is counted
	// and its reply queued every time.
	Dedupe string
	Queue  *Queue
	// Data is the caller's part of the reply's entry (see EntryField),
	// without a space.
	Data string
}

// Recorded is Record's answer.
type Recorded struct {
	// Previous is the number of earlier occurrences of the text inside the
	// window: 0 the first time. It is the reply's text.
	Previous int64
	// Duplicate reports that the message was recorded already: nothing
	// changed, and Previous is the first answer.
	Duplicate bool
	// RandomID is the reply's random_id; 0 when no reply was queued (a
	// duplicate whose reply was queued before).
	RandomID int32
}

// Record counts one occurrence of m.Text and queues its reply, once per
// m.Dedupe: a repeated call, or VK's re-delivery of the message, is
// answered as the first and changes nothing. On a single server it is one
// script run (record.lua), whose record of the message serves both the
// count and the reply. On a Redis Cluster (Options.Cluster) the text and
// the queue are in different slots: the count (count.lua, remembering the
// message in its slot) then the reply (queue.lua, remembering it in the
// queue's state); if the second fails, the error wraps ErrNotQueued with
// the count's answer, and the message coming again is a duplicate whose
// reply is queued then. A full queue refuses a message whose reply is not
// queued yet with ErrFull; in one call nothing is counted.
func (s *Store) Record(ctx context.Context, m *Message) (Recorded, error) {
	if m.Queue == nil {
		return Recorded{}, fmt.Errorf("%w: Record without a Queue", ErrInvalid)
	}
	if err := checkData(m.Data); err != nil {
		return Recorded{}, err
	}
	if s.cluster {
		r, err := s.count(ctx, m.Text, m.Dedupe, "")
		if err != nil {
			return Recorded{}, err
		}
		_, id, err := s.queue(ctx, m.Queue, m.Dedupe, strconv.FormatInt(r.Previous, 10), m.Data)
		if err != nil {
			return Recorded{Previous: r.Previous, Duplicate: r.Duplicate}, fmt.Errorf("%w: %w", ErrNotQueued, err)
		}
		return Recorded{Previous: r.Previous, Duplicate: r.Duplicate, RandomID: id}, nil
	}
	c := s.newCall(m.Queue, m.Dedupe)
	k := s.keys(m.Text, "")
	c.keys[4], c.keys[5] = k.names[0], k.names[3]
	copy(c.args[6:], s.recordFixed[:])
	c.data = m.Data
	c.args[10] = &c.data
	v, err := s.batch.Run(ctx, recordScript, c.keys[:], c.args[:11]).Result()
	if err != nil {
		return Recorded{}, queueError("record", err)
	}
	vals, ok := v.([]any)
	if !ok || len(vals) != 5 {
		return Recorded{}, fmt.Errorf("freq: unexpected record reply %#v", v)
	}
	r, err := parseReply(vals[:3])
	if err != nil {
		return Recorded{}, err
	}
	id, idOK := vals[3].(int64)
	epoch, epochOK := vals[4].(int64)
	if !idOK || !epochOK || int64(int32(id)) != id {
		return Recorded{}, fmt.Errorf("freq: unexpected record reply %#v", v)
	}
	if !r.Duplicate {
		m.Queue.Saw(epoch, int32(id))
	}
	return Recorded{Previous: r.Previous, Duplicate: r.Duplicate, RandomID: int32(id)}, nil
}

// Queue queues a reply whose text is text in q, once per dedupe key (as
// Record does; empty: every time), and reports whether it queued it: false
// when the reply of dedupe was queued already (nothing changed). data is
// as Message.Data. It is for a reply whose count is done elsewhere.
func (s *Store) Queue(ctx context.Context, q *Queue, dedupe, text, data string) (queued bool, err error) {
	if err := checkData(data); err != nil {
		return false, err
	}
	queued, _, err = s.queue(ctx, q, dedupe, text, data)
	return queued, err
}

// queue runs queue.lua; it returns the new entry's random_id too.
func (s *Store) queue(ctx context.Context, q *Queue, dedupe, text, data string) (bool, int32, error) {
	c := s.newCall(q, dedupe)
	c.args[6] = &text
	c.data = data
	c.args[7] = &c.data
	v, err := s.batch.Run(ctx, queueScript, c.keys[:4], c.args[:8]).Result()
	if err != nil {
		return false, 0, queueError("queue", err)
	}
	vals, ok := v.([]any)
	if !ok || len(vals) != 3 {
		return false, 0, fmt.Errorf("freq: unexpected queue reply %#v", v)
	}
	entry, _ := vals[0].(string)
	id, idOK := vals[1].(int64)
	epoch, epochOK := vals[2].(int64)
	if !idOK || !epochOK || int64(int32(id)) != id {
		return false, 0, fmt.Errorf("freq: unexpected queue reply %#v", v)
	}
	if entry == "" {
		return false, 0, nil
	}
	q.Saw(epoch, int32(id))
	return true, int32(id), nil
}

// A call is the keys and arguments of one run of a script that queues a
// reply: reply.lua's reply_args (KEYS[1..4], ARGV[1..6]), then the
// script's own. The numbers and strings that change per call are handed
// to go-redis by pointer (it writes them as their values), so a call costs
// one allocation for them all.
type call struct {
	keys      [6]string
	args      [11]any
	field     string
	data      string
	start     int32
	epoch, id int64
}

// checkData returns an error wrapping ErrInvalid when data cannot be an
// entry's (see EntryField).
func checkData(data string) error {
	if strings.IndexByte(data, ' ') >= 0 {
		return fmt.Errorf("%w: entry data %.40q holds a space", ErrInvalid, data)
	}
	return nil
}

// emptyArg is an empty string argument, boxed once: the mark when the
// queue saw no random_id yet, a count on Redis's clock.
var emptyArg any = ""

// newCall returns the call of a reply to the message of dedupe key dedupe
// in q, with reply_args filled in.
func (s *Store) newCall(q *Queue, dedupe string) *call {
	c := &call{field: recordField(dedupe), start: sequenceStart()}
	copy(c.keys[:], q.keys[:])
	c.args[0], c.args[1], c.args[2], c.args[3] = q.spanArg, &c.field, q.maxLenArg, &c.start
	c.args[4], c.args[5] = emptyArg, emptyArg
	if c.epoch, c.id = q.mark(); c.epoch != 0 {
		c.args[4], c.args[5] = &c.epoch, &c.id
	}
	return c
}

// sequenceStart returns where a community's random_id sequence begins if
// it has not (or must begin anew): a random number of the signed 32-bit
// range, not 0, drawn anew for every call.
func sequenceStart() int32 {
	if v := int32(rand.Uint32()); v != 0 {
		return v
	}
	return 1
}

// queueError returns err, from the script of op, wrapped in ErrFull when
// it says the stream is full.
func queueError(op string, err error) error {
	if redisconn.IsError(err, "OUTBOX_FULL") {
		return fmt.Errorf("%w: %s entries", ErrFull, strings.TrimPrefix(err.Error(), "OUTBOX_FULL "))
	}
	return fmt.Errorf("freq: %s: %w", op, err)
}
