package counters

import (
	"math"
	"time"

	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// visit records a participant key as seen now and answers with the active
// count and whether the key is new.
func (c *conn) visit(f wire.Frame) error {
	req, err := wire.ParseVisit(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, isNew, err := participant.Visit(ctx, c.s.stores.Participants, string(req.Name), string(req.Key), seconds(req.Timeout))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint32Flag(c.buf(), f.Opcode, f.Opaque, count32(n), isNew))
	return nil
}

// leave forgets a participant key and answers with the count left and
// whether the key was there.
func (c *conn) leave(f wire.Frame) error {
	req, err := wire.ParseLeave(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, removed, err := c.s.stores.Participants.Leave(ctx, string(req.Name), string(req.Key))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint32Flag(c.buf(), f.Opcode, f.Opaque, count32(n), removed))
	return nil
}

// active answers with the number of keys seen within the timeout.
func (c *conn) active(f wire.Frame) error {
	req, err := wire.ParseActive(f.Body)
	if err != nil {
		return err
	}
	ctx, cancel := c.s.storeContext()
	defer cancel()
	n, err := c.s.stores.Participants.Active(ctx, string(req.Name), seconds(req.Timeout))
	if err != nil {
		return StoreError(err)
	}
	c.send(wire.AppendUint32(c.buf(), f.Opcode, f.Opaque, count32(n)))
	return nil
}

// seconds converts a timeout field to a duration; 0 stays 0, the store's
// default. Every 32-bit value is within participant.MaxTimeout.
func seconds(s uint32) time.Duration { return time.Duration(s) * time.Second }

// count32 fits an active count into its 4-byte field.
func count32(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case uint64(n) > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
