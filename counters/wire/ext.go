package wire

import (
	"encoding/binary"
	"fmt"
)

// This file holds the bodies of the extension opcodes (SPEC §3.4):
//
//	op    request body                                   success body
//	Hit    name len (2), name                            total (8)
//	Total  name len (2), name                            total (8)
//	Add    delta (8), name len (2), name                 total (8)
//	Visit  timeout s (4), name len (2), name,            active (4), new (1)
//	       key len (2), key
//	Leave  name len (2), name, key len (2), key          active (4), removed (1)
//	Active timeout s (4), name len (2), name             active (4)
//
// A timeout of 0 means the store's default. Add's delta is 1 to 2^63-1 (the
// access counters only count up, and their totals are int64). As for the resource opcodes,
// bytes after the last field are ignored.

// AppendHit appends a Hit request to dst. Like AppendGet it only panics on a
// name longer than MaxNameLen.
func AppendHit(dst []byte, opaque uint32, name string) []byte {
	dst = appendRequestHeader(dst, OpHit, opaque, 2+len(name))
	return appendName(dst, name)
}

// AppendTotal appends a Total request to dst. Like AppendGet it only panics
// on a name longer than MaxNameLen.
func AppendTotal(dst []byte, opaque uint32, name string) []byte {
	dst = appendRequestHeader(dst, OpTotal, opaque, 2+len(name))
	return appendName(dst, name)
}

// AppendAdd appends an Add request to dst. Like AppendGet it only panics
// on a name longer than MaxNameLen; the delta is encoded as given.
func AppendAdd(dst []byte, opaque uint32, name string, delta uint64) []byte {
	dst = appendRequestHeader(dst, OpAdd, opaque, 8+2+len(name))
	dst = binary.BigEndian.AppendUint64(dst, delta)
	return appendName(dst, name)
}

// AppendVisit appends a Visit request to dst; timeout is in seconds, 0 for
// the default. It only panics on a name longer than MaxNameLen or a key
// longer than MaxKeyLen.
func AppendVisit(dst []byte, opaque, timeout uint32, name, key string) []byte {
	dst = appendRequestHeader(dst, OpVisit, opaque, 4+2+len(name)+2+len(key))
	dst = binary.BigEndian.AppendUint32(dst, timeout)
	return appendKey(appendName(dst, name), key)
}

// AppendLeave appends a Leave request to dst. It only panics on a name
// longer than MaxNameLen or a key longer than MaxKeyLen.
func AppendLeave(dst []byte, opaque uint32, name, key string) []byte {
	dst = appendRequestHeader(dst, OpLeave, opaque, 2+len(name)+2+len(key))
	return appendKey(appendName(dst, name), key)
}

// AppendActive appends an Active request to dst; timeout is in seconds, 0
// for the default. It only panics on a name longer than MaxNameLen.
func AppendActive(dst []byte, opaque, timeout uint32, name string) []byte {
	dst = appendRequestHeader(dst, OpActive, opaque, 4+2+len(name))
	dst = binary.BigEndian.AppendUint32(dst, timeout)
	return appendName(dst, name)
}

// ParseHit decodes a Hit request body and returns the counter name, which
// aliases body. Every error wraps ErrInvalid.
func ParseHit(body []byte) (name []byte, err error) { return parseName(body) }

// ParseTotal decodes a Total request body and returns the counter name,
// which aliases body. Every error wraps ErrInvalid.
func ParseTotal(body []byte) (name []byte, err error) { return parseName(body) }

// An AddRequest is a decoded Add request body.
type AddRequest struct {
	// Delta is 1 to MaxDelta.
	Delta uint64
	// Name aliases the body it was parsed from.
	Name []byte
}

// ParseAdd decodes an Add request body: a body shorter than its fields, a
// delta of 0 or above MaxDelta, or a bad name is invalid. Every error wraps
// ErrInvalid.
func ParseAdd(body []byte) (AddRequest, error) {
	if len(body) < 8 {
		return AddRequest{}, errShortBody
	}
	delta := binary.BigEndian.Uint64(body)
	if delta == 0 || delta > MaxDelta {
		return AddRequest{}, fmt.Errorf("%w: delta %d, want 1 to %d", ErrInvalid, delta, uint64(MaxDelta))
	}
	name, err := parseName(body[8:])
	if err != nil {
		return AddRequest{}, err
	}
	return AddRequest{Delta: delta, Name: name}, nil
}

// A VisitRequest is a decoded Visit request body.
type VisitRequest struct {
	// Timeout is in seconds; 0 means the store's default.
	Timeout uint32
	// Name and Key alias the body they were parsed from.
	Name, Key []byte
}

// ParseVisit decodes a Visit request body: a body shorter than its fields
// or a name or key of length 0 is invalid. Every error wraps ErrInvalid.
func ParseVisit(body []byte) (VisitRequest, error) {
	if len(body) < 4 {
		return VisitRequest{}, errShortBody
	}
	name, key, err := parseNameKey(body[4:])
	if err != nil {
		return VisitRequest{}, err
	}
	return VisitRequest{Timeout: binary.BigEndian.Uint32(body), Name: name, Key: key}, nil
}

// A LeaveRequest is a decoded Leave request body.
type LeaveRequest struct {
	// Name and Key alias the body they were parsed from.
	Name, Key []byte
}

// ParseLeave decodes a Leave request body. Every error wraps ErrInvalid.
func ParseLeave(body []byte) (LeaveRequest, error) {
	name, key, err := parseNameKey(body)
	if err != nil {
		return LeaveRequest{}, err
	}
	return LeaveRequest{Name: name, Key: key}, nil
}

// An ActiveRequest is a decoded Active request body.
type ActiveRequest struct {
	// Timeout is in seconds; 0 means the store's default.
	Timeout uint32
	// Name aliases the body it was parsed from.
	Name []byte
}

// ParseActive decodes an Active request body. Every error wraps ErrInvalid.
func ParseActive(body []byte) (ActiveRequest, error) {
	if len(body) < 4 {
		return ActiveRequest{}, errShortBody
	}
	name, err := parseName(body[4:])
	if err != nil {
		return ActiveRequest{}, err
	}
	return ActiveRequest{Timeout: binary.BigEndian.Uint32(body), Name: name}, nil
}

// parseNameKey decodes a name field followed by a key field.
func parseNameKey(b []byte) (name, key []byte, err error) {
	name, rest, err := cutField(b, errEmptyName, errNameTooLong)
	if err != nil {
		return nil, nil, err
	}
	key, _, err = cutField(rest, errEmptyKey, errKeyTooLong)
	if err != nil {
		return nil, nil, err
	}
	return name, key, nil
}

// AppendUint64 appends a successful response whose body is the 8-byte v:
// the answer to Hit, Total and Add (the total).
func AppendUint64(dst []byte, op Opcode, opaque uint32, v uint64) []byte {
	dst = appendResponseHeader(dst, op, StatusOK, opaque, 8)
	return binary.BigEndian.AppendUint64(dst, v)
}

// ParseUint64 decodes the 8-byte body of a successful Hit, Total or Add
// response.
func ParseUint64(body []byte) (uint64, error) {
	if len(body) != 8 {
		return 0, fmt.Errorf("%w: %d bytes, want 8", ErrMalformed, len(body))
	}
	return binary.BigEndian.Uint64(body), nil
}

// AppendUint32Flag appends a successful response whose body is the 4-byte
// v and a flag byte, 1 for true: the answer to Visit (active, new) and to
// Leave (active, removed). Active answers with AppendUint32.
func AppendUint32Flag(dst []byte, op Opcode, opaque uint32, v uint32, flag bool) []byte {
	dst = appendResponseHeader(dst, op, StatusOK, opaque, 5)
	dst = binary.BigEndian.AppendUint32(dst, v)
	if flag {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// ParseUint32Flag decodes the 5-byte body of a successful Visit or Leave
// response. A flag byte other than 0 or 1 is malformed.
func ParseUint32Flag(body []byte) (uint32, bool, error) {
	if len(body) != 5 {
		return 0, false, fmt.Errorf("%w: %d bytes, want 5", ErrMalformed, len(body))
	}
	if body[4] > 1 {
		return 0, false, fmt.Errorf("%w: flag byte %#02x, want 0 or 1", ErrMalformed, body[4])
	}
	return binary.BigEndian.Uint32(body), body[4] == 1, nil
}
