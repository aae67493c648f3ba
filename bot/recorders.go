package bot

import (
	"sync"
	"sync/atomic"

	"github.com/vkcounter/vkcounter/callback"
)

// maxIdleRecorders is how many recorders may wait for a message at once;
// one that finishes beyond them exits. A webhook under load has about as
// many messages in flight as connections.
const maxIdleRecorders = 256

// recorders are the goroutines that record messages: HandleMessage hands
// each message to one, so that the record goes on when its webhook gives
// up. A recorder that finishes waits for the next message instead of
// exiting, and keeps the stack it grew: a new goroutine per message grew
// its stack on every message (runtime.newstack under sha256, 5 % of the
// service's CPU at 9,000 messages a second).
type recorders struct {
	jobs     chan recordJob // unbuffered: a send succeeds only when a recorder waits
	idle     atomic.Int32   // recorders waiting on jobs, or about to
	stop     chan struct{}  // closed by Close once no message is being recorded
	stopOnce sync.Once
}

// recordJob is one message to record and where its result goes.
type recordJob struct {
	m    callback.Message
	done chan error // buffered for one
}

func (r *recorders) init() {
	r.jobs = make(chan recordJob)
	r.stop = make(chan struct{})
}

// close makes the waiting recorders, and those that finish later, exit.
func (r *recorders) close() { r.stopOnce.Do(func() { close(r.stop) }) }

// recordAsync hands j to a waiting recorder, or to a new one.
func (b *Bot) recordAsync(j recordJob) {
	select {
	case b.recorders.jobs <- j:
	default:
		go b.recordLoop(j)
	}
}

// recordLoop records j, then the messages handed to it while it waits,
// until there are maxIdleRecorders waiting or Close stops them.
func (b *Bot) recordLoop(j recordJob) {
	r := &b.recorders
	for {
		j.done <- b.record(j.m)
		b.inflight.Done()
		if r.idle.Add(1) > maxIdleRecorders {
			r.idle.Add(-1)
			return
		}
		select {
		case j = <-r.jobs:
			r.idle.Add(-1)
		case <-r.stop:
			r.idle.Add(-1)
			return
		}
	}
}
