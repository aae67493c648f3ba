package client

import (
	"context"
	"errors"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// A Pipeline queues requests and sends them in one write, then reads all
// their answers, checking that each answers its request (opcode and
// opaque). It is what a load generator needs: N requests in flight on one
// connection.
//
// The queueing methods do not validate their arguments, so invalid
// requests can be sent on purpose; the server answers them with
// wire.StatusInvalid. They panic only for a name longer than
// wire.MaxNameLen or a key longer than wire.MaxKeyLen. Stats and Dump are not pipelined: use the Client's
// methods. A Pipeline is not safe for concurrent use.
type Pipeline struct {
	c       *Client
	buf     []byte
	pending []pending
	results []Result
}

// pending is a queued request.
type pending struct {
	op     wire.Opcode
	opaque uint32
}

// A Result is the answer to one pipelined request.
type Result struct {
	Op     wire.Opcode
	Status wire.Status
	// Value is the 4-byte answer of a successful Get (the consumption),
	// Acquire (the resources acquired), Visit, Leave or Active (the active
	// count).
	Value uint32
	// Total is the answer of a successful Hit, Add or Total, WHit
	// (previous), WCount (count) or UCount (estimate).
	Total uint64
	// Flag is the flag of a successful Visit (the key is new), Leave
	// (the key was removed) or UAdd (the estimate may have changed).
	Flag bool
	// Message is the body of an error response.
	Message string
	// Latency is the time from the start of the pipeline's write to the
	// arrival of this answer.
	Latency time.Duration
}

// Err returns nil for a successful result, else its *wire.StatusError.
func (r Result) Err() error {
	if r.Status == wire.StatusOK {
		return nil
	}
	return &wire.StatusError{Opcode: r.Op, Status: r.Status, Message: r.Message}
}

// Pipeline returns an empty Pipeline on c.
func (c *Client) Pipeline() *Pipeline { return &Pipeline{c: c} }

// Len returns the number of queued requests.
func (p *Pipeline) Len() int { return len(p.pending) }

func (p *Pipeline) queue(op wire.Opcode) uint32 {
	opaque := p.c.nextOpaque()
	p.pending = append(p.pending, pending{op: op, opaque: opaque})
	return opaque
}

// Noop queues a Noop.
func (p *Pipeline) Noop() {
	p.buf = wire.AppendNoop(p.buf, p.queue(wire.OpNoop))
}

// Get queues a Get.
func (p *Pipeline) Get(name string) {
	p.buf = wire.AppendGet(p.buf, p.queue(wire.OpGet), name)
}

// Acquire queues an Acquire.
func (p *Pipeline) Acquire(name string, resources, maximum uint32) {
	p.buf = wire.AppendAcquire(p.buf, p.queue(wire.OpAcquire), name, resources, maximum)
}

// Release queues a Release.
func (p *Pipeline) Release(name string, resources uint32) {
	p.buf = wire.AppendRelease(p.buf, p.queue(wire.OpRelease), name, resources)
}

// Hit queues a Hit.
func (p *Pipeline) Hit(name string) {
	p.buf = wire.AppendHit(p.buf, p.queue(wire.OpHit), name)
}

// Add queues an Add of delta.
func (p *Pipeline) Add(name string, delta uint64) {
	p.buf = wire.AppendAdd(p.buf, p.queue(wire.OpAdd), name, delta)
}

// Total queues a Total.
func (p *Pipeline) Total(name string) {
	p.buf = wire.AppendTotal(p.buf, p.queue(wire.OpTotal), name)
}

// Visit queues a Visit; timeout is in seconds, 0 for the server's default.
func (p *Pipeline) Visit(name, key string, timeout uint32) {
	p.buf = wire.AppendVisit(p.buf, p.queue(wire.OpVisit), timeout, name, key)
}

// Leave queues a Leave.
func (p *Pipeline) Leave(name, key string) {
	p.buf = wire.AppendLeave(p.buf, p.queue(wire.OpLeave), name, key)
}

// Active queues an Active; timeout is in seconds, 0 for the server's
// default.
func (p *Pipeline) Active(name string, timeout uint32) {
	p.buf = wire.AppendActive(p.buf, p.queue(wire.OpActive), timeout, name)
}

// Exec sends the queued requests and returns their results in order; the
// results are valid until the next Exec. The Pipeline is then empty and can
// be reused. Error statuses are reported in the results, not as an error:
// an error means the connection is unusable.
func (p *Pipeline) Exec(ctx context.Context) ([]Result, error) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		p.buf = p.buf[:0]
		p.pending = p.pending[:0]
	}()
	p.results = p.results[:0]
	if len(p.pending) == 0 {
		return p.results, nil
	}
	start := time.Now()
	err := c.exchange(ctx, p.buf, func() error {
		for _, q := range p.pending {
			r, err := p.read(q)
			if err != nil {
				return err
			}
			r.Latency = time.Since(start)
			p.results = append(p.results, r)
		}
		return nil
	})
	return p.results, err
}

// read reads the answer to q; an error status is a result, not an error.
func (p *Pipeline) read(q pending) (Result, error) {
	f, err := p.c.readResponse(q.op, q.opaque)
	r := Result{Op: q.op, Status: f.Status}
	var se *wire.StatusError
	switch {
	case errors.As(err, &se):
		r.Message = se.Message
		return r, nil
	case err != nil:
		return r, err
	case q.op == wire.OpGet || q.op == wire.OpAcquire || q.op == wire.OpActive:
		r.Value, err = wire.ParseUint32(f.Body)
	case q.op == wire.OpHit || q.op == wire.OpTotal || q.op == wire.OpAdd,
		q.op == wire.OpWindowHit || q.op == wire.OpWindowCount || q.op == wire.OpUniqueCount:
		r.Total, err = wire.ParseUint64(f.Body)
	case q.op == wire.OpUniqueAdd:
		r.Flag, err = wire.ParseFlag(f.Body)
	case q.op == wire.OpVisit || q.op == wire.OpLeave:
		r.Value, r.Flag, err = wire.ParseUint32Flag(f.Body)
	}
	return r, err
}
