package counters

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
// wire.MaxNameLen. Stats and Dump are not pipelined: use the Client's
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
	// Value is the 4-byte answer of a successful Get (the consumption) or
	// Acquire (the resources acquired).
	Value uint32
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
	case q.op == wire.OpGet || q.op == wire.OpAcquire:
		r.Value, err = wire.ParseUint32(f.Body)
	}
	return r, err
}
