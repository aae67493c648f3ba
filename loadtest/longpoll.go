package loadtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// longPollRun is the state of a run delivering events by long poll. The
// events are queued in order by one worker, so event i of the run is the
// long-poll event numbered base+1+i.
type longPollRun struct {
	base   int          // the long-poll ts before the run's first event
	queued atomic.Int64 // events queued so far
	stop   context.CancelFunc
	done   chan struct{} // closed when the acknowledgement follower ends
}

// waitPolling waits up to o.Wait for the bot to ask the fake API for a
// long-poll server: from then on it receives every event queued.
func (r *callbackRun) waitPolling(ctx context.Context) error {
	deadline := time.Now().Add(r.o.Wait)
	for r.o.VK.Calls("groups.getLongPollServer") == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the bot has not asked %s for a long-poll server: is it running with VK_MODE=longpoll and this VK_API_URL?", r.o.VK.MethodURL())
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startAcks notes the long-poll ts and follows the bot's acknowledgements:
// an event is answered "ok" once the bot asks for the events after it.
func (r *callbackRun) startAcks(ctx context.Context) {
	lp := &r.lp
	lp.base = r.o.VK.LongPollTS(r.o.GroupID)
	ctx, lp.stop = context.WithCancel(ctx)
	lp.done = make(chan struct{})
	go func() {
		defer close(lp.done)
		next := 0 // the first event not yet acknowledged
		for next < len(r.events) {
			acked, err := r.o.VK.WaitLongPollAcked(ctx, r.o.GroupID, lp.base+next+1)
			now := time.Now()
			for ; next < len(r.events) && lp.base+next+1 <= acked; next++ {
				e := r.events[next]
				e.state, e.acked = counted, now
				r.webhook.record(e.start, now.Sub(e.start))
				r.posted.Add(1)
			}
			if err != nil {
				return
			}
		}
	}()
}

// queueEvent puts e in the fake API's long-poll history.
func (r *callbackRun) queueEvent(_ context.Context, e *event) {
	e.start = time.Now()
	e.state = interrupted // until acknowledged
	r.reqs.Add(1)
	r.o.VK.QueueEvents(r.o.GroupID, r.body(e))
	r.lp.queued.Add(1)
}

// awaitAcks waits up to ReplyTimeout for the bot to acknowledge every
// queued event; those it did not are failed.
func (r *callbackRun) awaitAcks(ctx context.Context) {
	lp := &r.lp
	wait, cancel := context.WithTimeout(ctx, r.o.ReplyTimeout)
	defer cancel()
	_, _ = r.o.VK.WaitLongPollAcked(wait, r.o.GroupID, lp.base+int(lp.queued.Load()))
	lp.stop()
	<-lp.done
	for _, e := range r.events[:lp.queued.Load()] {
		if e.state != counted {
			e.state = failed
			r.addError("not acknowledged")
			r.posted.Add(1)
		}
	}
}
