package counters

import (
	"errors"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// A handler runs one request. On success it queues its response(s) with
// c.send; on failure it returns an error that statusOf maps to the status
// of the error response. An error statusOf does not know ends the
// connection.
type handler func(c *conn, f wire.Frame) error

// handlers maps each opcode the server answers to its handler. Adding an
// opcode is one entry here and a handler in the cmd_*.go file of its family.
var handlers = [256]handler{
	wire.OpNoop:    (*conn).noop,
	wire.OpStats:   (*conn).stats,
	wire.OpGet:     (*conn).get,
	wire.OpAcquire: (*conn).acquire,
	wire.OpRelease: (*conn).release,
	wire.OpDump:    (*conn).dump,
}

// errUnknownCommand is the outcome of an opcode without a handler.
var errUnknownCommand = errors.New("unknown command")

// statuses maps the errors of the codec and the stores to protocol
// statuses: the one place where they are classified.
var statuses = []struct {
	err error
	st  wire.Status
}{
	{wire.ErrInvalid, wire.StatusInvalid},
	{resource.ErrInvalid, wire.StatusInvalid},
	{resource.ErrNotFound, wire.StatusNotFound},
	{resource.ErrNotAvailable, wire.StatusNotAvailable},
	{resource.ErrNotAcquired, wire.StatusNotAcquired},
	{resource.ErrNoMemory, wire.StatusOutOfMemory},
	{errUnknownCommand, wire.StatusUnknownCommand},
}

// statusOf returns the status answering err, or false if err is not a
// request failure (an I/O error, say).
func statusOf(err error) (wire.Status, bool) {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			return s.st, true
		}
	}
	return 0, false
}
