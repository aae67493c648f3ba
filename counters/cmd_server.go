package counters

import "github.com/vkcounter/vkcounter/counters/wire"

// noop answers with an empty success.
func (c *conn) noop(f wire.Frame) error {
	c.send(wire.AppendResponse(c.buf(), f.Opcode, wire.StatusOK, f.Opaque, nil))
	return nil
}

// stats answers with the server's statistics.
func (c *conn) stats(f wire.Frame) error {
	c.send(wire.AppendStatsResponse(c.buf(), f.Opaque, c.s.Stats()))
	return nil
}
