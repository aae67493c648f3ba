package wire

// Framing constants.
const (
	// HeaderSize is the size in bytes of every request and response header.
	HeaderSize = 12

	// MagicRequest is the first byte of every request.
	MagicRequest byte = 0x90

	// MagicResponse is the first byte of every response.
	MagicResponse byte = 0x91

	// MaxNameLen is the longest counter name: its length travels in 2 bytes.
	MaxNameLen = 1<<16 - 1
	// MaxKeyLen is the longest participant key (Visit, Leave): its length
	// travels in 2 bytes.
	MaxKeyLen = 1<<16 - 1

	// BodyAllowance is how many bytes beyond the largest valid body of an
	// opcode a request may carry. Bytes after the name are ignored, and some
	// clients may pad, so a request is refused only past this allowance.
	BodyAllowance = 64

	// MaxUnknownBody is the largest body accepted (and skipped) for an opcode
	// this codec does not know; the request is then answered with
	// StatusUnknownCommand and the connection stays open. Larger bodies are a
	// protocol error. It is at least the largest known body (UAdd's
	// with MaxUniqueKeys keys).
	MaxUnknownBody = 2 + MaxUniqueFieldLen + 2 + MaxUniqueKeys*(2+MaxUniqueFieldLen) + BodyAllowance

	// MaxResponseBody is the largest response body a Reader made by
	// NewResponseReader accepts. The biggest real one is a Dump entry with a
	// 65535-byte name; Stats stays far below this.
	MaxResponseBody = 1 << 20
)

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
