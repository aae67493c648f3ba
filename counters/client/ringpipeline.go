package client

import (
	"context"
	"errors"
	"sync"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// A RingPipeline queues requests for a RingClient and sends each server
// its share in one write, all servers at once, then returns the results in
// the order the requests were queued. Like Pipeline, its queueing methods
// do not validate their arguments. It is not safe for concurrent use.
type RingPipeline struct {
	rc     *RingClient
	queued []ringQueued
}

// A ringQueued is one queued request: where it goes and how to queue it
// on that server's Pipeline.
type ringQueued struct {
	addr  string
	name  string // of an Acquire or Release, for the holdings
	op    wire.Opcode
	n     uint32 // resources of an Acquire or Release
	queue func(p *Pipeline)
}

// Pipeline returns an empty RingPipeline on rc.
func (rc *RingClient) Pipeline() *RingPipeline { return &RingPipeline{rc: rc} }

// Len returns the number of queued requests.
func (p *RingPipeline) Len() int { return len(p.queued) }

func (p *RingPipeline) add(name string, op wire.Opcode, n uint32, queue func(p *Pipeline)) {
	p.rc.mu.Lock()
	addr := p.rc.ring.Owner(name)
	if h, ok := p.rc.held[name]; ok && (op == wire.OpAcquire || op == wire.OpRelease) {
		addr = h.addr
	}
	p.rc.mu.Unlock()
	p.queued = append(p.queued, ringQueued{addr: addr, name: name, op: op, n: n, queue: queue})
}

// Get queues a Get.
func (p *RingPipeline) Get(name string) {
	p.add(name, wire.OpGet, 0, func(q *Pipeline) { q.Get(name) })
}

// Acquire queues an Acquire.
func (p *RingPipeline) Acquire(name string, resources, maximum uint32) {
	p.add(name, wire.OpAcquire, resources, func(q *Pipeline) { q.Acquire(name, resources, maximum) })
}

// Release queues a Release.
func (p *RingPipeline) Release(name string, resources uint32) {
	p.add(name, wire.OpRelease, resources, func(q *Pipeline) { q.Release(name, resources) })
}

// Hit queues a Hit.
func (p *RingPipeline) Hit(name string) {
	p.add(name, wire.OpHit, 0, func(q *Pipeline) { q.Hit(name) })
}

// Add queues an Add of delta.
func (p *RingPipeline) Add(name string, delta uint64) {
	p.add(name, wire.OpAdd, 0, func(q *Pipeline) { q.Add(name, delta) })
}

// Total queues a Total.
func (p *RingPipeline) Total(name string) {
	p.add(name, wire.OpTotal, 0, func(q *Pipeline) { q.Total(name) })
}

// Visit queues a Visit; timeout is in seconds, 0 for the server's default.
func (p *RingPipeline) Visit(name, key string, timeout uint32) {
	p.add(name, wire.OpVisit, 0, func(q *Pipeline) { q.Visit(name, key, timeout) })
}

// Leave queues a Leave.
func (p *RingPipeline) Leave(name, key string) {
	p.add(name, wire.OpLeave, 0, func(q *Pipeline) { q.Leave(name, key) })
}

// Active queues an Active; timeout is in seconds, 0 for the server's
// default.
func (p *RingPipeline) Active(name string, timeout uint32) {
	p.add(name, wire.OpActive, 0, func(q *Pipeline) { q.Active(name, timeout) })
}

// Exec sends the queued requests and returns their results in the order
// they were queued. The RingPipeline is then empty. Error statuses are
// results; an error means some server's requests were not all answered,
// and names the server: the results missing are Status 0 and Op 0. If its
// connection failed, nothing acquired there is held any more, even by the
// requests answered before the failure; if ctx ended before they were
// sent, nothing changed there.
func (p *RingPipeline) Exec(ctx context.Context) ([]Result, error) {
	queued := p.queued
	p.queued = nil
	results := make([]Result, len(queued))
	byAddr := map[string][]int{}
	for i, q := range queued {
		byAddr[q.addr] = append(byAddr[q.addr], i)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for addr, idx := range byAddr {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.rc.do(ctx, addr, func(c *Client) error {
				pl := c.Pipeline()
				for _, i := range idx {
					queued[i].queue(pl)
				}
				rs, err := pl.Exec(ctx)
				for k, r := range rs {
					results[idx[k]] = r
				}
				if err != nil {
					// Nothing was sent, or the connection failed and
					// do forgets every holding there: the acquires
					// answered before the failure are released too.
					return err
				}
				// Record under the connection's lock, before anything
				// can close it (see RingClient.retire).
				for _, i := range idx {
					p.record(queued[i], results[i])
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// record notes in the RingClient's holdings what the answer r to q
// acquired or released.
func (p *RingPipeline) record(q ringQueued, r Result) {
	if r.Status != wire.StatusOK || r.Op != q.op {
		return
	}
	switch q.op {
	case wire.OpAcquire:
		p.rc.record(q.name, q.addr, int64(q.n))
	case wire.OpRelease:
		p.rc.record(q.name, q.addr, -int64(q.n))
	}
}
