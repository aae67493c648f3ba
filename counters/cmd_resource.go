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
}

// resources runs the resource request f, with the ones already buffered
// after it (up to maxConnBatch), through the holder's Do in one round trip
// to the store, then answers them in order: the one place acquire, release
// and get are parsed and answered. A request alone is a batch of one, and
// its name is not copied. The memory table has no round trip to save, so
// its requests run as batches of one (gathering would only copy names).
func (c *conn) resources(f wire.Frame) {
	b := &c.batch
	b.frames, b.ops, b.errs, b.names, b.owned = b.frames[:0], b.ops[:0], b.errs[:0], b.names[:0], 0
	b.add(f)
	for c.s.table == nil && len(b.frames) < maxConnBatch {
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
		err := b.errs[i]
		if err == nil {
			err = results[i].Err
		}
		if err == nil {
			switch g.Opcode {
			case wire.OpAcquire:
				c.send(wire.AppendUint32(c.buf(), g.Opcode, g.Opaque, b.ops[i].Resources))
			case wire.OpRelease:
				c.send(wire.AppendResponse(c.buf(), g.Opcode, wire.StatusOK, g.Opaque, nil))
			case wire.OpGet:
				c.send(wire.AppendUint32(c.buf(), g.Opcode, g.Opaque, results[i].Value))
			}
		} else {
			err = StoreError(err)
		}
		c.finish(g, err)
	}
}

// add parses the resource request f into the batch.
func (b *resourceBatch) add(f wire.Frame) {
	var op resource.Op
	var err error
	switch f.Opcode {
	case wire.OpAcquire:
		var req wire.AcquireRequest
		req, err = wire.ParseAcquire(f.Body)
		op = resource.Op{Kind: resource.OpAcquire, Name: req.Name, Resources: req.Resources, Maximum: req.Maximum}
	case wire.OpRelease:
		var req wire.ReleaseRequest
		req, err = wire.ParseRelease(f.Body)
		op = resource.Op{Kind: resource.OpRelease, Name: req.Name, Resources: req.Resources}
	case wire.OpGet:
		var name []byte
		name, err = wire.ParseGet(f.Body)
		op = resource.Op{Kind: resource.OpGet, Name: name}
	}
	if err != nil {
		op = resource.Op{} // invalid: answered with err
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
