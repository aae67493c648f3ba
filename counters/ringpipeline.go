package counters

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
// results; an error means the connection to some server failed: the
// results of that server's requests are missing (Status 0 and Op 0), and
// the error names the server.
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
				return err
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, q := range queued {
		r := results[i]
		if r.Status != wire.StatusOK || r.Op != q.op {
			continue
		}
		switch q.op {
		case wire.OpAcquire:
			p.rc.record(q.name, q.addr, int64(q.n))
		case wire.OpRelease:
			_, held := p.rc.Held(q.name)
			p.rc.record(q.name, q.addr, -min(int64(q.n), int64(held)))
		}
	}
	return results, errors.Join(errs...)
}
