package counters

import (
	"context"
	"fmt"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// get answers with a counter's consumption.
func (c *conn) get(f wire.Frame) error {
	name, err := wire.ParseGet(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.resourceContext()
	defer cancel()
	v, err := c.s.res.Get(ctx, name)
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint32(c.buf(), f.Opcode, f.Opaque, v))
	return nil
}

// acquire takes resources for this connection and answers with the number
// requested.
func (c *conn) acquire(f wire.Frame) error {
	req, err := wire.ParseAcquire(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.resourceContext()
	defer cancel()
	if err := c.holder.Acquire(ctx, req.Name, req.Resources, req.Maximum); err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint32(c.buf(), f.Opcode, f.Opaque, req.Resources))
	return nil
}

// release gives back resources this connection holds.
func (c *conn) release(f wire.Frame) error {
	req, err := wire.ParseRelease(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.resourceContext()
	defer cancel()
	if err := c.holder.Release(ctx, req.Name, req.Resources); err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendResponse(c.buf(), f.Opcode, wire.StatusOK, f.Opaque, nil))
	return nil
}

// dump answers with one response per counter and an empty one at the end.
func (c *conn) dump(f wire.Frame) error {
	ctx, cancel := c.s.resourceContext()
	defer cancel()
	var werr error
	err := c.s.res.Dump(ctx, func(e resource.Entry) error {
		_, werr = c.w.Write(wire.AppendDumpEntry(c.buf(), f.Opaque, wire.DumpEntry(e)))
		return werr
	})
	if werr != nil {
		return fmt.Errorf("dump: %w", werr)
	}
	if err != nil {
		// Entries already sent stay sent; the error ends the series.
		return StoreError(err)
	}
	c.send(wire.AppendDumpEnd(c.buf(), f.Opaque))
	return nil
}

// maxConnBatch is the most requests of one connection sent to the resource
// store in one round trip.
const maxConnBatch = 64

// A resourceBatcher is a ResourceHolder that runs several requests of its
// connection in one round trip (resource.RedisHolder).
type resourceBatcher interface {
	Do(ctx context.Context, ops []resource.Op) []resource.Result
}

// batchable reports whether requests with opcode op may join a batch.
func batchable(op wire.Opcode) bool {
	return op == wire.OpAcquire || op == wire.OpRelease || op == wire.OpGet
}

// batch runs f and the resource requests already buffered after it (up to
// maxConnBatch) in one round trip to the store, then answers them in
// order, each exactly as dispatch would have.
func (c *conn) batch(b resourceBatcher, f wire.Frame) {
	frames := []wire.Frame{copyFrame(f)}
	for len(frames) < maxConnBatch {
		h, ok := c.r.Next()
		if !ok || !batchable(h.Opcode) {
			break
		}
		g, err := c.r.Read()
		if err != nil {
			break // unreachable: Next saw the whole, valid frame
		}
		frames = append(frames, copyFrame(g))
	}
	ops := make([]resource.Op, len(frames))
	errs := make([]error, len(frames))
	for i, g := range frames {
		switch g.Opcode {
		case wire.OpAcquire:
			req, err := wire.ParseAcquire(g.Body)
			ops[i], errs[i] = resource.Op{Kind: resource.OpAcquire, Name: req.Name, Resources: req.Resources, Maximum: req.Maximum}, err
		case wire.OpRelease:
			req, err := wire.ParseRelease(g.Body)
			ops[i], errs[i] = resource.Op{Kind: resource.OpRelease, Name: req.Name, Resources: req.Resources}, err
		case wire.OpGet:
			name, err := wire.ParseGet(g.Body)
			ops[i], errs[i] = resource.Op{Kind: resource.OpGet, Name: name}, err
		}
		if errs[i] != nil {
			ops[i] = resource.Op{} // invalid: not run, answered with errs[i]
		}
	}
	ctx, cancel := c.s.resourceContext()
	results := b.Do(ctx, ops)
	cancel()
	for i, g := range frames {
		err := errs[i]
		if err == nil {
			err = results[i].Err
		}
		if err == nil {
			switch g.Opcode {
			case wire.OpAcquire:
				c.send(wire.AppendUint32(c.buf(), g.Opcode, g.Opaque, ops[i].Resources))
			case wire.OpRelease:
				c.send(wire.AppendResponse(c.buf(), g.Opcode, wire.StatusOK, g.Opaque, nil))
			case wire.OpGet:
				c.send(wire.AppendUint32(c.buf(), g.Opcode, g.Opaque, results[i].Value))
			}
		}
		if err != nil {
			err = StoreError(err)
		}
		c.finish(g, err)
	}
}

// copyFrame returns f with a body of its own: the reader reuses its buffer.
func copyFrame(f wire.Frame) wire.Frame {
	f.Body = append([]byte(nil), f.Body...)
	return f
}
