package counters

import "github.com/vkcounter/vkcounter/counters/wire"

// hit adds one to an access counter and answers with its new total.
func (c *conn) hit(f wire.Frame) error {
	name, err := wire.ParseHit(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	total, err := c.s.stores.Access.Hit(ctx, string(name))
	if err != nil {
		return storeError(err)
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
		return storeError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(total)))
	return nil
}
