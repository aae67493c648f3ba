package longpoll

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// A Group runs one Poller per community until Close. Its methods are safe
// for concurrent use.
type Group struct {
	pollers map[int]*Poller // by group id; not changed after Start
	cancel  context.CancelFunc
	stopped chan struct{} // closed once every Poller's Run returned
}

// Start returns a Group running a Poller for each of opts, or the first
// error of New (then nothing was started).
func Start(opts []Options) (*Group, error) {
	g := &Group{pollers: make(map[int]*Poller, len(opts))}
	for _, o := range opts {
		p, err := New(o)
		if err != nil {
			return nil, err
		}
		g.pollers[o.GroupID] = p
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.stopped = cancel, make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range g.pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Run(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(g.stopped)
	}()
	return g, nil
}

// Close stops the pollers and waits until they have stopped (the messages
// they were handling returned, the leases are released), or until ctx
// ends; then the error says so, and a poller still waiting on a stalled
// Redis (a lease renewal, the release) stops on its own within a few
// seconds (see Poller.Run). Calling Close again waits again.
//
// Once Close was called, a poller starts handling no further message (a
// call to the handler that was just beginning gets a context already
// ended), and it moves its ts only past messages the handler accepted: a
// handler that refuses them once it is closed leaves the ts where it was,
// and the next poller asks for those messages again.
func (g *Group) Close(ctx context.Context) error {
	g.cancel()
	select {
	case <-g.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("longpoll: pollers still stopping: %w", context.Cause(ctx))
	}
}

// Stats returns each poller's totals, by group id.
func (g *Group) Stats() map[string]Stats {
	out := make(map[string]Stats, len(g.pollers))
	for id, p := range g.pollers {
		out[strconv.Itoa(id)] = p.Stats()
	}
	return out
}

// Total returns the pollers' totals summed, and how many communities this
// instance polls (holds the lease of).
func (g *Group) Total() (sum Stats, polling int) {
	for _, p := range g.pollers {
		s := p.Stats()
		sum.Requests += s.Requests
		sum.Events += s.Events
		sum.Messages += s.Messages
		sum.Skipped += s.Skipped
		sum.Retries += s.Retries
		sum.Failed1 += s.Failed1
		sum.Failed2 += s.Failed2
		sum.Failed3 += s.Failed3
		sum.Sessions += s.Sessions
		if s.Polling {
			polling++
		}
	}
	return sum, polling
}
