package wire

import (
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// DefaultAddr is the counter port's address unless told another: the
// yrmcds counter port, 11215, on loopback (the protocol has no
// authentication).
const DefaultAddr = "127.0.0.1:11215"

// Framing constants.
const (
	// HeaderSize is the size in bytes of every request and response header.
	HeaderSize = 12

	// MagicRequest is the first byte of every request.
	MagicRequest byte = 0x90

	// MagicResponse is the first byte of every response.
	MagicResponse byte = 0x91

	// MaxNameLen is the longest counter name a request can carry: its
	// length travels in 2 bytes. Resource counter names (Get, Acquire,
	// Release) may be that long; the extension opcodes' names are bounded
	// by MaxFieldLen.
	MaxNameLen = 1<<16 - 1
	// MaxKeyLen is the longest participant key (Visit, Leave) a request
	// can carry: its length travels in 2 bytes. The stores accept at most
	// MaxFieldLen.
	MaxKeyLen = 1<<16 - 1

	// BodyAllowance is how many bytes beyond the largest valid body of an
	// opcode a request may carry. Bytes after the name are ignored, and some
	// clients may pad, so a request is refused only past this allowance.
	BodyAllowance = 64

	// MaxUnknownBody is the largest body accepted for an opcode this codec
	// does not know. A request Reader skips such a body without buffering
	// it; the request is then answered with StatusUnknownCommand and the
	// connection stays open. Larger bodies are a protocol error. It is at
	// least the largest known body (UAdd's with MaxUniqueKeys keys).
	MaxUnknownBody = 2 + MaxUniqueFieldLen + 2 + MaxUniqueKeys*(2+MaxUniqueFieldLen) + BodyAllowance

	// MaxRetainedBody is the largest body buffer a Reader keeps from one
	// frame to the next. A body that fits the read buffer
	// (DefaultBufferSize) is returned in place; a longer one is read into
	// a buffer of the Reader's, which is dropped at the next Read when it
	// holds more than MaxRetainedBody bytes, so one large request does not
	// pin its size for the rest of a connection's life.
	MaxRetainedBody = 16 << 10

	// MaxResponseBody is the largest response body a Reader made by
	// NewResponseReader accepts. The biggest real one is a Dump entry with a
	// 65535-byte name; Stats stays far below this.
	MaxResponseBody = 1 << 20
)

// Limits of the extension opcodes' fields. The extension opcodes' body
// limits (Opcode.MaxRequestBody) follow from them, so a request for a
// name or key no store accepts is refused by its length alone.
const (
	// MaxFieldLen is the longest name or key the stores of the extension
	// opcodes accept (access, participant, window and unique counters):
	// the counter name rule of counters/internal/names, which the
	// participant and unique keys share. A longer field in a body that
	// is still within its opcode's limit is answered StatusInvalid.
	MaxFieldLen = names.MaxLen

	// MaxDelta is the largest delta of an Add: access counter totals are
	// int64.
	MaxDelta = 1<<63 - 1

	// MaxListField is the longest prefix or after of a List request.
	MaxListField = MaxFieldLen

	// MaxUniqueKeys is the most keys one UAdd carries.
	MaxUniqueKeys = 1000
	// MaxUnionNames is the most names one UCount carries.
	MaxUnionNames = 100
	// MaxUniqueFieldLen is the longest name or key of UAdd and UCount.
	MaxUniqueFieldLen = MaxFieldLen

	// MaxListLimit is the most access counters one List answers.
	MaxListLimit = 1000
	// MaxTimeout is the longest participant timeout (Visit, Active): the
	// most the 32-bit seconds field carries.
	MaxTimeout = (1<<32 - 1) * time.Second
	// MaxWindow is the longest window of WHit and WCount.
	MaxWindow = 7 * 24 * time.Hour
)

// A ListEntry is one access counter of a List answer.
type ListEntry struct {
	Name  string
	Total int64
}

// An Opcode says what a request asks for. Responses copy the opcode of their
// request.
type Opcode byte

// The opcodes of the yrmcds counter protocol.
const (
	OpNoop    Opcode = 0x00
	OpGet     Opcode = 0x01
	OpAcquire Opcode = 0x02
	OpRelease Opcode = 0x03
	OpStats   Opcode = 0x10
	OpDump    Opcode = 0x11
)

// The extension opcodes of vkcounter: access counters (0x2x) and participant
// counters (0x3x). A yrmcds server answers them with StatusUnknownCommand, so
// the protocol stays a compatible superset.
const (
	OpHit    Opcode = 0x20
	OpTotal  Opcode = 0x21
	OpAdd    Opcode = 0x22
	OpVisit  Opcode = 0x30
	OpLeave  Opcode = 0x31
	OpActive Opcode = 0x32
)

// OpList lists access counters by name prefix, a page at a time, in a
// series of responses like Dump (see list.go).
const OpList Opcode = 0x28

// The extension opcodes of vkcounter's window counters (0x4x) and unique
// counters (0x5x).
const (
	OpWindowHit   Opcode = 0x40
	OpWindowCount Opcode = 0x41
	OpUniqueAdd   Opcode = 0x50
	OpUniqueCount Opcode = 0x51
)

// A Status is the outcome carried by a response header. Every status but
// StatusOK comes with its Message as the response body.
//
// Status implements error, so that errors.Is(err, StatusNotFound) can test a
// *StatusError returned by a client.
type Status byte

// The statuses of the yrmcds counter protocol.
const (
	StatusOK             Status = 0x00
	StatusNotFound       Status = 0x01
	StatusInvalid        Status = 0x04
	StatusNotAvailable   Status = 0x21
	StatusNotAcquired    Status = 0x22
	StatusUnknownCommand Status = 0x81
	StatusOutOfMemory    Status = 0x82
)

// StatusStoreFailure is vkcounter's answer to an extension request whose
// store failed (Redis unreachable, a file unwritable, the store timeout
// passed). The request may have taken effect or not; the connection stays
// open and the client may retry. The code is memcached's "temporary
// failure", next to the 0x8x statuses the counter protocol borrowed from it.
const StatusStoreFailure Status = 0x86

// StatusInternalError is vkcounter's answer to an extension request whose
// store is damaged in a way retrying cannot fix (an access counter whose
// count files are all corrupt, in the File store) until an operator
// repairs it. The request changed nothing. The code is memcached's
// "internal error".
const StatusInternalError Status = 0x84
