package counters

import (
	"errors"
	"fmt"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// A handler runs one request. On success it queues its response(s) with
// c.send; on failure it returns an error that StatusOf maps to the status
// of the error response. An error StatusOf does not know ends the
// connection.
type handler func(c *conn, f wire.Frame) error

// handlers maps each opcode the server answers to its handler. Adding an
// opcode is one entry here and a handler in the cmd_*.go file of its family.
// The resource requests (acquire, release, get) are not here: they run
// through the holder's Do, in batches (conn.resources).
var handlers = [256]handler{
	wire.OpNoop:   (*conn).noop,
	wire.OpStats:  (*conn).stats,
	wire.OpDump:   (*conn).dump,
	wire.OpHit:    (*conn).hit,
	wire.OpTotal:  (*conn).total,
	wire.OpAdd:    (*conn).add,
	wire.OpList:   (*conn).list,
	wire.OpVisit:  (*conn).visit,
	wire.OpLeave:  (*conn).leave,
	wire.OpActive: (*conn).active,

	wire.OpWindowHit:   (*conn).windowHit,
	wire.OpWindowCount: (*conn).windowCount,
	wire.OpUniqueAdd:   (*conn).uniqueAdd,
	wire.OpUniqueCount: (*conn).uniqueCount,
}

// errUnknownCommand is the outcome of an opcode without a handler.
var errUnknownCommand = errors.New("unknown command")

// errStoreFailed wraps the error of a store call (access, participant,
// window or unique counters, or the resource store's Stats) that failed
// for a reason the statuses table does not know: the store is
// unreachable, broken or slower than Stores.Timeout.
var errStoreFailed = errors.New("counter store failed")

// statuses maps the errors of the codec and the stores to protocol
// statuses: the one place where they are classified. The HTTP API
// (package httpapi) maps these statuses on to HTTP ones.
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
	{resource.ErrStore, wire.StatusStoreFailure},
	{access.ErrInvalidName, wire.StatusInvalid},
	{access.ErrNoMemory, wire.StatusOutOfMemory},
	{access.ErrInvalidDelta, wire.StatusInvalid},
	{access.ErrInvalidLimit, wire.StatusInvalid},
	{access.ErrNotFound, wire.StatusNotFound},
	// A total at math.MaxInt64 cannot take another hit, as a resource
	// counter at its maximum cannot take another acquire.
	{access.ErrOverflow, wire.StatusNotAvailable},
	// Count files that are all corrupt stay so until an operator repairs
	// them: not a store failure a retry may get past.
	{access.ErrCorrupt, wire.StatusInternalError},
	{participant.ErrInvalidName, wire.StatusInvalid},
	{participant.ErrNoMemory, wire.StatusOutOfMemory},
	{participant.ErrTooManyKeys, wire.StatusOutOfMemory},
	{participant.ErrInvalidKey, wire.StatusInvalid},
	{participant.ErrInvalidTimeout, wire.StatusInvalid},
	{window.ErrInvalidName, wire.StatusInvalid},
	{window.ErrNoMemory, wire.StatusOutOfMemory},
	{window.ErrInvalidWindow, wire.StatusInvalid},
	{window.ErrInvalidTime, wire.StatusInvalid},
	{unique.ErrInvalidName, wire.StatusInvalid},
	{unique.ErrNoMemory, wire.StatusOutOfMemory},
	{unique.ErrInvalidKey, wire.StatusInvalid},
	{unique.ErrInvalidCount, wire.StatusInvalid},
	{unique.ErrNotFound, wire.StatusNotFound},
	{errUnknownCommand, wire.StatusUnknownCommand},
	{errStoreFailed, wire.StatusStoreFailure},
}

// StatusOf returns the status answering err, or false if err is not a
// request failure (an I/O error, say). The HTTP API maps these statuses on
// to HTTP ones.
func StatusOf(err error) (wire.Status, bool) {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			return s.st, true
		}
	}
	return 0, false
}

// StoreError classifies the error of a store call: an error the statuses
// table knows (bad arguments, not found) is returned as it is, anything
// else is wrapped in an error StatusOf answers wire.StatusStoreFailure.
func StoreError(err error) error {
	if _, ok := StatusOf(err); ok {
		return err
	}
	return fmt.Errorf("%w: %w", errStoreFailed, err)
}
