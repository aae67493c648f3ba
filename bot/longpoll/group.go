package longpoll

import (
	"context"
	"strconv"
	"sync"
)

// A Group runs one Poller per community until Close. Its methods are safe
// for concurrent use.
type Group struct {
	pollers map[int]*Poller // by group id; not changed after Start
	cancel  context.CancelFunc
	wg      sync.WaitGroup
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
	g.cancel = cancel
	for _, p := range g.pollers {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			p.Run(ctx)
		}()
	}
	return g, nil
}

// Close stops the pollers and waits for the messages they are handling.
func (g *Group) Close() {
	g.cancel()
	g.wg.Wait()
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
