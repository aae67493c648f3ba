package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// The counters the bot feeds through Options.Activity.
const (
	// MessagesCounter is the access counter that counts the messages.
	MessagesCounter = "vk.messages"
	// UsersCounter is the participant counter each message's sender
	// (from_id) visits.
	UsersCounter = "vk.users"
	// UsersTimeout is how long a sender stays active in UsersCounter.
	UsersTimeout = 300 * time.Second
)

// UsersDay is the unique counter of the senders of day t (UTC), such as
// "vk.users:2026-11-26": a HyperLogLog of every from_id written on that
// day. A batch is written on the day it is flushed, so a message in the
// last ActivityFlush of a day may count for the next.
func UsersDay(t time.Time) string { return UsersCounter + ":" + t.UTC().Format(time.DateOnly) }

const (
	// activityEarly flushes a batch before ActivityFlush once it holds
	// this many messages or senders.
	activityEarly = 1000
	// activityMaxUsers bounds the senders kept while the store fails;
	// beyond it new senders are dropped (and counted as errors).
	activityMaxUsers = 100000
	// visitChunk is the most keys in one VisitMany call.
	visitChunk = 1000
	// activityFailLogEvery spaces the failure lines while the store is
	// down (a batch is retried every ActivityFlush).
	activityFailLogEvery = 10 * time.Second
	// activityReAdd is how long a sender added to the day's unique
	// counter is not added again (see addedSenders).
	activityReAdd = UsersTimeout
	// activityEstimateEvery is how often the day's estimate is read when
	// the flushes have no sender to add: what other instances add shows
	// within it (see addedSenders.due).
	activityEstimateEvery = time.Minute
)

// An activityBatch gathers the activity of counted messages between
// flushes, so that a burst of messages costs the counters one Add and a few
// VisitMany calls instead of two calls per message.
type activityBatch struct {
	bot *Bot

	mu    sync.Mutex // guards hits, users and order
	hits  int64
	users map[string]struct{}
	order []string // users in the order first seen

	// unsure is a batch of hits whose write failed with an unknown
	// outcome; it is retried with the same batch id before any newer hits
	// are written. Only the flusher touches it.
	unsure hitBatch

	seenMu sync.Mutex // guards seen
	seen   activitySeen

	added addedSenders // only the flusher touches it

	failLog  *ratelog.Logger // the failure line, rate-limited
	kick     chan struct{}   // a batch is big enough to flush early
	quit     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (a *activityBatch) start(b *Bot) {
	a.bot = b
	a.failLog = ratelog.New(b.log, activityFailLogEvery)
	a.users = map[string]struct{}{}
	a.kick = make(chan struct{}, 1)
	a.quit = make(chan struct{})
	a.done = make(chan struct{})
	go a.run()
}

// note records the activity of m, a message counted for the first time.
func (a *activityBatch) note(m callback.Message) {
	a.mu.Lock()
	a.hits++
	if m.FromID != 0 {
		a.addUserLocked(strconv.Itoa(m.FromID))
	}
	early := a.hits >= activityEarly || len(a.order) >= activityEarly
	a.mu.Unlock()
	if early {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// addUserLocked adds key unless it is there or the batch is full. a.mu
// must be held.
func (a *activityBatch) addUserLocked(key string) {
	if _, seen := a.users[key]; seen {
		return
	}
	if len(a.order) >= activityMaxUsers {
		a.bot.stats.activityErrors.Add(1)
		return
	}
	a.users[key] = struct{}{}
	a.order = append(a.order, key)
}

// stop writes what is left and ends the flusher; later calls wait for it.
func (a *activityBatch) stop() {
	a.stopOnce.Do(func() { close(a.quit) })
	<-a.done
}

func (a *activityBatch) run() {
	defer close(a.done)
	t := time.NewTicker(a.bot.opts.ActivityFlush)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-a.kick:
		case <-a.quit:
			a.flush()
			return
		}
		a.flush()
	}
}

// A hitBatch is a number of hits written as one, under an id that makes
// its write idempotent.
type hitBatch struct {
	n  int64
	id string
}

// flush writes the gathered activity. What fails is kept for the next
// flush, so a Redis outage delays the counters but loses nothing; a batch
// of hits is retried under its own id, so it is never counted twice.
func (a *activityBatch) flush() {
	a.mu.Lock()
	hits, users := a.hits, a.order
	a.hits, a.users, a.order = 0, map[string]struct{}{}, nil
	a.mu.Unlock()
	if hits == 0 && len(users) == 0 && a.unsure.n == 0 {
		return
	}
	b := a.bot
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.ActivityTimeout)
	defer cancel()
	fresh := hitBatch{n: hits}
	if hits > 0 {
		fresh.id = batchID()
	}
	for _, batch := range []*hitBatch{&a.unsure, &fresh} {
		if batch.n == 0 {
			continue
		}
		total, err := b.opts.Activity.AddOnce(ctx, MessagesCounter, batch.n, batch.id)
		if err != nil {
			if batch == &fresh {
				a.unsure = fresh
			} else {
				a.putBack(fresh.n, nil) // not written yet: still fresh
			}
			a.failed(err, MessagesCounter)
			break
		}
		*batch = hitBatch{}
		a.saw(func(s *activitySeen) { s.messages, s.messagesAt = total, time.Now() })
	}
	for len(users) > 0 {
		chunk := users[:min(len(users), visitChunk)]
		users = users[len(chunk):]
		// Visiting is idempotent: a retried visit only refreshes the time.
		active, _, err := b.opts.Activity.VisitMany(ctx, UsersCounter, chunk, UsersTimeout)
		if err != nil {
			a.putBack(0, chunk)
			a.failed(err, UsersCounter)
			continue
		}
		now := time.Now()
		a.saw(func(s *activitySeen) { s.users, s.usersAt = active, now })
		day := UsersDay(now)
		// Adding to a HyperLogLog is idempotent too: a chunk put back
		// after this fails is visited and added again harmlessly. With
		// no sender to add, the call reads the estimate, once a minute.
		fresh := a.added.fresh(day, now, chunk)
		if len(fresh) == 0 && !a.added.due(now) {
			continue
		}
		estimate, err := b.opts.Activity.AddUnique(ctx, day, fresh)
		if err != nil {
			a.putBack(0, chunk)
			a.failed(err, day)
			continue
		}
		a.added.note(fresh, estimate, now)
		a.saw(func(s *activitySeen) { s.day, s.usersToday, s.usersTodayAt = day, estimate, time.Now() })
	}
}

// addedSenders are the senders this process added to the day's unique
// counter in the last activityReAdd: a flush adds only the others. Adding
// a sender again changes nothing, yet it was most of Redis's work for the
// activity: a sparse HyperLogLog is searched for every key added (a
// quarter of a flush's cost, 1 µs of Redis CPU a message from 1,000
// senders; BENCHMARKS.md). The set is forgotten at the day's turn, every
// activityReAdd and at activityMaxUsers senders, and when the estimate
// read falls below the senders this process alone added (the sketch was
// lost with Redis's data): then each sender is added again with its next
// message, as every message added it before. A flush with no sender to
// add reads the estimate only when it is due: a minute after the last
// reading (a message that comes alone then costs one command less: what
// a command-priced plan bills).
type addedSenders struct {
	day   string
	since time.Time
	keys  map[string]struct{}
	read  time.Time // when the estimate was last read; zero: not since the set began
}

// fresh returns the senders of chunk not added to day's counter lately.
func (s *addedSenders) fresh(day string, now time.Time, chunk []string) []string {
	if s.keys == nil || s.day != day || now.Sub(s.since) >= activityReAdd || len(s.keys) >= activityMaxUsers {
		*s = addedSenders{day: day, since: now, keys: make(map[string]struct{}, len(chunk))}
	}
	var out []string
	for _, k := range chunk {
		if _, ok := s.keys[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// due reports whether the day's estimate is to be read at now though no
// sender is to be added: activityEstimateEvery after the last reading, or
// never read since the set began (a new day, or the set forgotten).
func (s *addedSenders) due(now time.Time) bool {
	return s.read.IsZero() || now.Sub(s.read) >= activityEstimateEvery
}

// note records keys as added to the day's counter, whose estimate read at
// now was estimate. An estimate below 97 % of the senders this process
// added (a HyperLogLog's standard error is 0.81 %) tells that the counter
// lost them: the set is forgotten.
func (s *addedSenders) note(keys []string, estimate int64, now time.Time) {
	for _, k := range keys {
		s.keys[k] = struct{}{}
	}
	s.read = now
	if estimate < int64(len(s.keys))*97/100 {
		s.keys = nil
	}
}

// activitySeen is what the bot last learnt of its activity counters when
// it wrote them, and when: the figures need no Redis call to show. A zero
// time means not written by this process yet.
type activitySeen struct {
	messages   int64     // total of MessagesCounter
	messagesAt time.Time // when messages was read
	users      int       // active senders in UsersCounter
	usersAt    time.Time // when users was read
	// usersToday is the estimated distinct senders of the unique counter
	// day (UsersDay of the day it was read).
	day          string
	usersToday   int64
	usersTodayAt time.Time
}

// saw updates the last seen figures.
func (a *activityBatch) saw(f func(*activitySeen)) {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	f(&a.seen)
}

// An ActivityReport is the activity counters as the bot last wrote them,
// each figure with the age of its reading (age.Never before the first
// write): what /stats shows under "counters". It needs no Redis call.
type ActivityReport struct {
	Messages MessagesReport `json:"vk.messages"` // MessagesCounter
	Users    UsersReport    `json:"vk.users"`    // UsersCounter
}

// A MessagesReport is the total of MessagesCounter.
type MessagesReport struct {
	Total int64       `json:"total"`
	Age   age.Seconds `json:"age_seconds"`
}

// A UsersReport is the active senders of UsersCounter (those seen in the
// last UsersTimeout) and today's distinct senders.
type UsersReport struct {
	Active         int         `json:"active"`
	TimeoutSeconds int64       `json:"timeout_seconds"`
	Age            age.Seconds `json:"age_seconds"`
	Today          TodayReport `json:"today"`
}

// A TodayReport is the estimated distinct senders of the unique counter
// Counter (UsersDay of the day it was read).
type TodayReport struct {
	Counter  string      `json:"counter"`
	Estimate int64       `json:"estimate"`
	Age      age.Seconds `json:"age_seconds"`
}

// ActivityReport returns the activity counters as last written.
func (b *Bot) ActivityReport() ActivityReport {
	b.activity.seenMu.Lock()
	s := b.activity.seen
	b.activity.seenMu.Unlock()
	return ActivityReport{
		Messages: MessagesReport{Total: s.messages, Age: age.Since(s.messagesAt)},
		Users: UsersReport{Active: s.users, TimeoutSeconds: int64(UsersTimeout / time.Second), Age: age.Since(s.usersAt),
			Today: TodayReport{Counter: s.day, Estimate: s.usersToday, Age: age.Since(s.usersTodayAt)}},
	}
}

// putBack keeps hits and users for the next flush.
func (a *activityBatch) putBack(hits int64, users []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hits += hits
	for _, u := range users {
		a.addUserLocked(u)
	}
}

// failed logs a failed write.
func (a *activityBatch) failed(err error, counter string) {
	b := a.bot
	b.stats.activityErrors.Add(1)
	a.failLog.Error().Err(err).Str("counter", counter).Msg("activity counter not updated; retrying with the next batch")
}

// batchID returns a fresh random id for a batch of hits.
func batchID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
