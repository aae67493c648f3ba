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
	v, err := c.s.table.Get(name)
	if err != nil {
		return err
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
	if err := c.holder.Acquire(req.Name, req.Resources, req.Maximum); err != nil {
		return err
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
	if err := c.holder.Release(req.Name, req.Resources); err != nil {
		return err
	}
	c.send(wire.AppendResponse(c.buf(), f.Opcode, wire.StatusOK, f.Opaque, nil))
	return nil
}

// dump answers with one response per counter and an empty one at the end.
func (c *conn) dump(f wire.Frame) error {
	err := c.s.table.Dump(func(e resource.Entry) error {
		_, err := c.w.Write(wire.AppendDumpEntry(c.buf(), f.Opaque, wire.DumpEntry(e)))
		return err
	})
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	c.send(wire.AppendDumpEnd(c.buf(), f.Opaque))
	return nil
}
