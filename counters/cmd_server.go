package counters

import "github.com/vkcounter/vkcounter/counters/wire"

// noop answers with an empty success.
func (c *conn) noop(f wire.Frame) error {
	c.send(wire.AppendResponse(c.buf(), f.Opcode, wire.StatusOK, f.Opaque, nil))
	return nil
}

// stats answers with the server's statistics.
func (c *conn) stats(f wire.Frame) error {
	ctx, cancel := c.s.storeContext()
	defer cancel()
	stats, err := c.s.stats(ctx)
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendStatsResponse(c.buf(), f.Opaque, stats))
	return nil
}
