package counters

import (
	"fmt"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/wire"
)

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

// batchable reports whether requests with opcode op are resource requests,
// which run through the holder's Do.
func batchable(op wire.Opcode) bool {
	return op == wire.OpAcquire || op == wire.OpRelease || op == wire.OpGet
}

// A resourceBatch is the buffers of the resource requests resources runs at
// once, kept by the connection from one batch to the next.
type resourceBatch struct {
	frames []wire.Frame // the requests' headers; bodies are not kept
	ops    []resource.Op
	errs   []error // a request's parse error: not run, answered with it
	names  []byte  // the names of ops, once the reader's buffer moves on
	owned  int     // ops[:owned] have their names in names
	one    [1]resource.Op
}

// resources runs the resource request f, with the ones already buffered
// after it (up to maxConnBatch), through the holder's Do in one round trip
// to the store, then answers them in order: acquire, release and get are
// parsed (parseResource) and answered (answerResource) in one place. The
// memory table has no round trip to save, so its requests run as batches
// of one, with no name copied.
func (c *conn) resources(f wire.Frame) {
	b := &c.batch
	if c.s.table != nil {
		op, err := parseResource(f)
		var r resource.Result
		if err == nil {
			b.one[0] = op
			r = c.holder.Do(c.s.ctx, b.one[:])[0]
		}
		c.answerResource(f, op, r, err)
		return
	}
	b.frames, b.ops, b.errs, b.names, b.owned = b.frames[:0], b.ops[:0], b.errs[:0], b.names[:0], 0
	b.add(f)
	for len(b.frames) < maxConnBatch {
		h, ok := c.r.Next()
		if !ok || !batchable(h.Opcode) {
			break
		}
		b.own() // reading g may overwrite the bodies the names point into
		g, err := c.r.Read()
		if err != nil {
			break // unreachable: Next saw the whole, valid frame
		}
		b.add(g)
	}
	ctx, cancel := c.s.resourceContext()
	results := c.holder.Do(ctx, b.ops)
	cancel()
	for i, g := range b.frames {
		var r resource.Result
		if b.errs[i] == nil {
			r = results[i]
		}
		c.answerResource(g, b.ops[i], r, b.errs[i])
	}
}

// parseResource decodes the acquire, release or get request f into an Op
// whose name aliases f's body.
func parseResource(f wire.Frame) (resource.Op, error) {
	switch f.Opcode {
	case wire.OpAcquire:
		req, err := wire.ParseAcquire(f.Body)
		return resource.Op{Kind: resource.OpAcquire, Name: req.Name, Resources: req.Resources, Maximum: req.Maximum}, err
	case wire.OpRelease:
		req, err := wire.ParseRelease(f.Body)
		return resource.Op{Kind: resource.OpRelease, Name: req.Name, Resources: req.Resources}, err
	default: // wire.OpGet
		name, err := wire.ParseGet(f.Body)
		return resource.Op{Kind: resource.OpGet, Name: name}, err
	}
}

// answerResource queues the answer to the resource request f, which ran as
// op with result r, or failed to parse with err.
func (c *conn) answerResource(f wire.Frame, op resource.Op, r resource.Result, err error) {
	if err == nil {
		err = r.Err
	}
	if err != nil {
		c.finish(f, StoreError(err))
		return
	}
	switch f.Opcode {
	case wire.OpAcquire:
		c.send(wire.AppendUint32(c.buf(), f.Opcode, f.Opaque, op.Resources))
	case wire.OpRelease:
		c.send(wire.AppendResponse(c.buf(), f.Opcode, wire.StatusOK, f.Opaque, nil))
	case wire.OpGet:
		c.send(wire.AppendUint32(c.buf(), f.Opcode, f.Opaque, r.Value))
	}
	c.finish(f, nil)
}

// add parses the resource request f into the batch.
func (b *resourceBatch) add(f wire.Frame) {
	op, err := parseResource(f)
	if err != nil {
		op = resource.Op{} // invalid: not run, answered with err
	}
	f.Body = nil
	b.frames, b.ops, b.errs = append(b.frames, f), append(b.ops, op), append(b.errs, err)
}

// own copies the names of the ops parsed since the last call out of the
// reader's buffer into b.names. A slice of b.names stays valid when a later
// append moves it: the old array is left as it was.
func (b *resourceBatch) own() {
	for ; b.owned < len(b.ops); b.owned++ {
		name := b.ops[b.owned].Name
		start := len(b.names)
		b.names = append(b.names, name...)
		b.ops[b.owned].Name = b.names[start:len(b.names):len(b.names)]
	}
}
