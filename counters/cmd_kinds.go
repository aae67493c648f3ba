package counters

import (
	"github.com/vkcounter/vkcounter/counters/wire"
)

// windowHit records a hit on a window counter and answers with the hits
// inside the window before it.
func (c *conn) windowHit(f wire.Frame) error {
	req, err := wire.ParseWindow(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, err := c.s.stores.Windows.Hit(ctx, string(req.Name), seconds(req.Window))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(n)))
	return nil
}

// windowCount answers with the hits inside a window counter's window.
func (c *conn) windowCount(f wire.Frame) error {
	req, err := wire.ParseWindow(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, err := c.s.stores.Windows.Count(ctx, string(req.Name), seconds(req.Window))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(n)))
	return nil
}

// uniqueAdd adds keys to a unique counter and answers whether its
// estimate may have changed.
func (c *conn) uniqueAdd(f wire.Frame) error {
	req, err := wire.ParseUniqueAdd(f.Body)
	if err != nil {
		return err
	}
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = string(k)
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	changed, err := c.s.stores.Uniques.Add(ctx, string(req.Name), keys)
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendFlag(c.buf(), f.Opcode, f.Opaque, changed))
	return nil
}

// uniqueCount answers with the estimate of the union of unique counters,
// or Not found if none was ever added to.
func (c *conn) uniqueCount(f wire.Frame) error {
	raw, err := wire.ParseUniqueCount(f.Body)
	if err != nil {
		return err
	}
	names := make([]string, len(raw))
	for i, n := range raw {
		names[i] = string(n)
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, err := c.s.stores.Uniques.Count(ctx, names...)
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint64(c.buf(), f.Opcode, f.Opaque, uint64(n)))
	return nil
}
