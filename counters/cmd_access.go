package counters

import (
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// hit adds one to an access counter and answers with its new total.
func (c *conn) hit(f wire.Frame) error {
	name, err := wire.ParseHit(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	total, err := access.Hit(ctx, c.s.stores.Access, string(name))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(total)))
	return nil
}

// add adds a delta to an access counter and answers with its new total.
func (c *conn) add(f wire.Frame) error {
	req, err := wire.ParseAdd(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	// ParseAdd keeps the delta within int64.
	total, err := c.s.stores.Access.Add(ctx, string(req.Name), int64(req.Delta))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(total)))
	return nil
}

// total answers with an access counter's total, or Not found if it was
// never hit.
func (c *conn) total(f wire.Frame) error {
	name, err := wire.ParseTotal(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	total, err := c.s.stores.Access.Total(ctx, string(name))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(total)))
	return nil
}

// list answers a List with one response per access counter of the page,
// then one saying whether more follow. A store that cannot list (the file
// store) makes it an unknown command.
func (c *conn) list(f wire.Frame) error {
	req, err := wire.ParseList(f.Body)
	if err != nil {
		return err
	}
	lister, ok := c.s.stores.Access.(access.Lister)
	if !ok {
		return errUnknownCommand
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	entries, more, err := lister.List(ctx, string(req.Prefix), string(req.After), int(req.Limit))
	if err != nil {
		return StoreError(err)
	}
	for _, e := range entries {
		c.send(wire.AppendListEntry(c.buf(), f.Opaque, e.Name, uint64(e.Total)))
	}
	c.send(wire.AppendListEnd(c.buf(), f.Opaque, more))
	return nil
}
