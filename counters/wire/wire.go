// Package wire is the codec of the yrmcds counter protocol: the 12-byte
// header, opcodes, statuses and the body of every request and response,
// plus a Reader that frames a byte stream with bounded memory. It also
// encodes vkcounter's extension opcodes, which use the same header: access
// counters (Hit, Total, Add, List), participant counters (Visit, Leave,
// Active), window counters (WHit, WCount) and unique counters (UAdd,
// UCount). The protocol's limits are in const.go.
//
// It has no server state, so clients, servers and load generators share it.
// Requests and responses are built with the Append functions, which append
// one whole frame to a byte slice (so many can be pipelined in one write),
// and taken apart with the Parse functions, which check every length field
// against the bytes present.
//
// A request:
//
//	buf := wire.AppendAcquire(nil, 1, "jobs", 1, 10)
//	// 90 02 00 00  00 00 00 0e  00 00 00 01  00 00 00 01  00 00 00 0a  00 04 'j' 'o' 'b' 's'
//
// All integers are big-endian.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// A Header is the fixed 12-byte start of every frame.
type Header struct {
	// Magic is MagicRequest or MagicResponse.
	Magic  byte
	Opcode Opcode
	// Status is the outcome of a response. In a request this byte holds
	// the flags, of which none are defined; servers ignore it.
	Status Status
	// BodyLen is the length of the body that follows the header.
	BodyLen uint32
	// Opaque is chosen by the client and echoed in every response.
	Opaque uint32
}

// ParseHeader decodes the header in the first HeaderSize bytes of b. The
// reserved byte is ignored. It panics if b is shorter than HeaderSize.
func ParseHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		Magic:   b[0],
		Opcode:  Opcode(b[1]),
		Status:  Status(b[2]),
		BodyLen: binary.BigEndian.Uint32(b[4:8]),
		Opaque:  binary.BigEndian.Uint32(b[8:12]),
	}
}

// AppendHeader appends the encoding of h, with a zero reserved byte, to dst.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, h.Magic, byte(h.Opcode), byte(h.Status), 0)
	dst = binary.BigEndian.AppendUint32(dst, h.BodyLen)
	return binary.BigEndian.AppendUint32(dst, h.Opaque)
}

// ErrInvalid is wrapped by every error a request Parse function returns: the
// request is answered with StatusInvalid.
var ErrInvalid = errors.New("invalid arguments")

// ErrMalformed is wrapped by every error a response Parse function returns:
// the server broke the protocol.
var ErrMalformed = errors.New("malformed response body")

// The reasons a request body is invalid, in the order they are checked.
var (
	errShortBody    = fmt.Errorf("%w: body shorter than its fixed part", ErrInvalid)
	errNoResources  = fmt.Errorf("%w: resources is 0", ErrInvalid)
	errMaxBelow     = fmt.Errorf("%w: maximum is less than resources", ErrInvalid)
	errEmptyName    = fmt.Errorf("%w: name length is 0", ErrInvalid)
	errNameTooLong  = fmt.Errorf("%w: name length exceeds the body", ErrInvalid)
	errNameTooLarge = fmt.Errorf("%w: name longer than %d bytes", ErrInvalid, MaxNameLen)
	errEmptyKey     = fmt.Errorf("%w: key length is 0", ErrInvalid)
	errKeyTooLong   = fmt.Errorf("%w: key length exceeds the body", ErrInvalid)
	errBadKindName  = fmt.Errorf("%w: name", ErrInvalid)
	errBadKey       = fmt.Errorf("%w: key", ErrInvalid)
)

// CheckName returns an error wrapping ErrInvalid unless name can be sent as a
// counter name: 1 to MaxNameLen arbitrary bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return errEmptyName
	case len(name) > MaxNameLen:
		return errNameTooLarge
	}
	return nil
}

// CheckKindName returns an error wrapping ErrInvalid unless name can be
// sent as the name of an access, participant, window or unique counter
// (the extension opcodes): the stores' one name rule (counters/internal/
// names: 1 to MaxFieldLen arbitrary bytes). A longer body is refused as
// framing by the server, which closes the connection.
func CheckKindName(name string) error { return names.Check(name, errBadKindName) }

// CheckKey returns an error wrapping ErrInvalid unless key can be sent as a
// participant or unique key: the same rule as a name.
func CheckKey(key string) error { return names.Check(key, errBadKey) }

// parseName decodes a 2-byte name length and the name from the start of b.
// Bytes after the name are ignored.
func parseName(b []byte) ([]byte, error) {
	name, _, err := cutField(b, errEmptyName, errNameTooLong)
	return name, err
}

// cutField decodes a 2-byte length and that many bytes from the start of b
// and returns them and the bytes after them. A zero length gives errEmpty;
// a length beyond b gives errBeyond.
func cutField(b []byte, errEmpty, errBeyond error) (field, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, errShortBody
	}
	n := int(binary.BigEndian.Uint16(b))
	switch {
	case n == 0:
		return nil, nil, errEmpty
	case n > len(b)-2:
		return nil, nil, errBeyond
	}
	return b[2 : 2+n], b[2+n:], nil
}

// appendName appends a 2-byte length and name to dst. It panics if name is
// longer than MaxNameLen, which CheckName rules out.
func appendName(dst []byte, name string) []byte {
	if len(name) > MaxNameLen {
		panic("wire: counter name longer than MaxNameLen")
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// appendKey appends a 2-byte length and key to dst. It panics if key is
// longer than MaxKeyLen, which CheckKey rules out.
func appendKey(dst []byte, key string) []byte {
	if len(key) > MaxKeyLen {
		panic("wire: participant key longer than MaxKeyLen")
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	return append(dst, key...)
}
