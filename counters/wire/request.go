package wire

import "encoding/binary"

// appendRequestHeader appends a request header for a body of n bytes.
func appendRequestHeader(dst []byte, op Opcode, opaque uint32, n int) []byte {
	return AppendHeader(dst, Header{Magic: MagicRequest, Opcode: op, BodyLen: uint32(n), Opaque: opaque})
}

// AppendNoop appends a Noop request to dst.
func AppendNoop(dst []byte, opaque uint32) []byte {
	return appendRequestHeader(dst, OpNoop, opaque, 0)
}

// AppendStats appends a Stats request to dst.
func AppendStats(dst []byte, opaque uint32) []byte {
	return appendRequestHeader(dst, OpStats, opaque, 0)
}

// AppendDump appends a Dump request to dst.
func AppendDump(dst []byte, opaque uint32) []byte {
	return appendRequestHeader(dst, OpDump, opaque, 0)
}

// AppendGet appends a Get request to dst. It does not validate its
// arguments (so tests can send invalid requests) except that it panics if
// name is longer than MaxNameLen.
func AppendGet(dst []byte, opaque uint32, name string) []byte {
	dst = appendRequestHeader(dst, OpGet, opaque, 2+len(name))
	return appendName(dst, name)
}

// AppendAcquire appends an Acquire request to dst. Like AppendGet it only
// panics on a name longer than MaxNameLen.
func AppendAcquire(dst []byte, opaque uint32, name string, resources, maximum uint32) []byte {
	dst = appendRequestHeader(dst, OpAcquire, opaque, 10+len(name))
	dst = binary.BigEndian.AppendUint32(dst, resources)
	dst = binary.BigEndian.AppendUint32(dst, maximum)
	return appendName(dst, name)
}

// AppendRelease appends a Release request to dst. Like AppendGet it only
// panics on a name longer than MaxNameLen.
func AppendRelease(dst []byte, opaque uint32, name string, resources uint32) []byte {
	dst = appendRequestHeader(dst, OpRelease, opaque, 6+len(name))
	dst = binary.BigEndian.AppendUint32(dst, resources)
	return appendName(dst, name)
}

// ParseGet decodes a Get request body and returns the counter name, which
// aliases body.
func ParseGet(body []byte) (name []byte, err error) {
	return parseName(body)
}

// An AcquireRequest is a decoded Acquire request body.
type AcquireRequest struct {
	Resources uint32
	Maximum   uint32
	// Name aliases the body it was parsed from.
	Name []byte
}

// ParseAcquire decodes and validates an Acquire request body. The checks run
// in the reference server's order: body shorter than 10 bytes, Resources 0,
// Maximum below Resources, name length 0 or beyond the body. Every error
// wraps ErrInvalid.
func ParseAcquire(body []byte) (AcquireRequest, error) {
	if len(body) < 10 {
		return AcquireRequest{}, errShortBody
	}
	r := AcquireRequest{
		Resources: binary.BigEndian.Uint32(body[0:4]),
		Maximum:   binary.BigEndian.Uint32(body[4:8]),
	}
	switch {
	case r.Resources == 0:
		return AcquireRequest{}, errNoResources
	case r.Maximum < r.Resources:
		return AcquireRequest{}, errMaxBelow
	}
	name, err := parseName(body[8:])
	if err != nil {
		return AcquireRequest{}, err
	}
	r.Name = name
	return r, nil
}

// A ReleaseRequest is a decoded Release request body.
type ReleaseRequest struct {
	// Resources may be 0.
	Resources uint32
	// Name aliases the body it was parsed from.
	Name []byte
}

// ParseRelease decodes and validates a Release request body. Every error
// wraps ErrInvalid.
func ParseRelease(body []byte) (ReleaseRequest, error) {
	if len(body) < 6 {
		return ReleaseRequest{}, errShortBody
	}
	name, err := parseName(body[4:])
	if err != nil {
		return ReleaseRequest{}, err
	}
	return ReleaseRequest{Resources: binary.BigEndian.Uint32(body[0:4]), Name: name}, nil
}
