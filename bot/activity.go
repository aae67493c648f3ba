package bot

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/callback"
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

// flush writes the gathered activity. What fails is put back for the next
// flush, so a Redis outage delays the counters but loses nothing.
func (a *activityBatch) flush() {
	a.mu.Lock()
	hits, users := a.hits, a.order
	a.hits, a.users, a.order = 0, map[string]struct{}{}, nil
	a.mu.Unlock()
	if hits == 0 && len(users) == 0 {
		return
	}
	b := a.bot
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.ActivityTimeout)
	defer cancel()
	if hits > 0 {
		if _, err := b.opts.Activity.Add(ctx, MessagesCounter, hits); err != nil {
			a.failed(err, MessagesCounter, hits, nil)
		}
	}
	for len(users) > 0 {
		chunk := users[:min(len(users), visitChunk)]
		users = users[len(chunk):]
		if _, _, err := b.opts.Activity.VisitMany(ctx, UsersCounter, chunk, UsersTimeout); err != nil {
			a.failed(err, UsersCounter, 0, chunk)
		}
	}
}

// failed logs a failed write and keeps its hits and users for the next flush.
func (a *activityBatch) failed(err error, counter string, hits int64, users []string) {
	b := a.bot
	b.stats.activityErrors.Add(1)
	a.failLog.Error().Err(err).Str("counter", counter).Msg("activity counter not updated; retrying with the next batch")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hits += hits
	for _, u := range users {
		a.addUserLocked(u)
	}
}
