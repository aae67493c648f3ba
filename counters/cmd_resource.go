package counters

import (
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
		return storeError(err)
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
		return storeError(err)
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
		return storeError(err)
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
		return storeError(err)
	}
	c.send(wire.AppendDumpEnd(c.buf(), f.Opaque))
	return nil
}
