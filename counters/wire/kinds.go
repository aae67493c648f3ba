package wire

import (
	"encoding/binary"
	"fmt"
)

// This file holds the bodies of the window and unique counter opcodes:
//
//	op      request body                                  success body
//	WHit    window s (4), name len (2), name              previous (8)
//	WCount  window s (4), name len (2), name              count (8)
//	UAdd    name len (2), name, key count (2),            changed (1)
//	        key count × (key len (2), key)
//	UCount  name count (2), name count × (name len (2),   estimate (8)
//	        name)
//
// A unique counter's names and keys are at most MaxUniqueFieldLen bytes,
// so that the largest UAdd and UCount bodies stay small (the limits are in
// const.go). As for the other
// opcodes, bytes after the last field are ignored.

var (
	errKeyCount  = fmt.Errorf("%w: key count must be 1 to %d", ErrInvalid, MaxUniqueKeys)
	errNameCount = fmt.Errorf("%w: name count must be 1 to %d", ErrInvalid, MaxUnionNames)
	errFieldLong = fmt.Errorf("%w: name or key longer than %d bytes", ErrInvalid, MaxUniqueFieldLen)
)

// AppendWindowHit appends a WHit request: window in seconds. It only
// panics on a name longer than MaxNameLen.
func AppendWindowHit(dst []byte, opaque, window uint32, name string) []byte {
	return appendWindow(dst, OpWindowHit, opaque, window, name)
}

// AppendWindowCount appends a WCount request: window in seconds. It only
// panics on a name longer than MaxNameLen.
func AppendWindowCount(dst []byte, opaque, window uint32, name string) []byte {
	return appendWindow(dst, OpWindowCount, opaque, window, name)
}

func appendWindow(dst []byte, op Opcode, opaque, window uint32, name string) []byte {
	dst = appendRequestHeader(dst, op, opaque, 4+2+len(name))
	dst = binary.BigEndian.AppendUint32(dst, window)
	return appendName(dst, name)
}

// A WindowRequest is a decoded WHit or WCount request body.
type WindowRequest struct {
	// Window is in seconds; the store checks its range.
	Window uint32
	// Name aliases the body it was parsed from.
	Name []byte
}

// ParseWindow decodes a WHit or WCount request body. Every error wraps
// ErrInvalid.
func ParseWindow(body []byte) (WindowRequest, error) {
	if len(body) < 4 {
		return WindowRequest{}, errShortBody
	}
	name, err := parseName(body[4:])
	if err != nil {
		return WindowRequest{}, err
	}
	return WindowRequest{Window: binary.BigEndian.Uint32(body), Name: name}, nil
}

// AppendUniqueAdd appends a UAdd request. It only panics on more than
// 65535 keys or a name or key longer than MaxNameLen; the server refuses
// more than MaxUniqueKeys keys or fields over MaxUniqueFieldLen bytes.
func AppendUniqueAdd(dst []byte, opaque uint32, name string, keys []string) []byte {
	n := 2 + len(name) + 2
	for _, k := range keys {
		n += 2 + len(k)
	}
	if len(keys) > 0xffff {
		panic("wire: more than 65535 keys")
	}
	dst = appendRequestHeader(dst, OpUniqueAdd, opaque, n)
	dst = appendName(dst, name)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(keys)))
	for _, k := range keys {
		dst = appendName(dst, k)
	}
	return dst
}

// A UniqueAddRequest is a decoded UAdd request body.
type UniqueAddRequest struct {
	// Name and Keys alias the body they were parsed from.
	Name []byte
	Keys [][]byte
}

// ParseUniqueAdd decodes a UAdd request body: 1 to MaxUniqueKeys keys,
// each and the name 1 to MaxUniqueFieldLen bytes. Every error wraps
// ErrInvalid.
func ParseUniqueAdd(body []byte) (UniqueAddRequest, error) {
	name, rest, err := cutField(body, errEmptyName, errNameTooLong)
	if err != nil {
		return UniqueAddRequest{}, err
	}
	if len(name) > MaxUniqueFieldLen {
		return UniqueAddRequest{}, errFieldLong
	}
	if len(rest) < 2 {
		return UniqueAddRequest{}, errShortBody
	}
	n := int(binary.BigEndian.Uint16(rest))
	if n < 1 || n > MaxUniqueKeys {
		return UniqueAddRequest{}, errKeyCount
	}
	rest = rest[2:]
	keys := make([][]byte, n)
	for i := range keys {
		if keys[i], rest, err = cutField(rest, errEmptyKey, errKeyTooLong); err != nil {
			return UniqueAddRequest{}, err
		}
		if len(keys[i]) > MaxUniqueFieldLen {
			return UniqueAddRequest{}, errFieldLong
		}
	}
	return UniqueAddRequest{Name: name, Keys: keys}, nil
}

// AppendUniqueCount appends a UCount request for the union of names. It
// only panics on more than 65535 names or a name longer than MaxNameLen.
func AppendUniqueCount(dst []byte, opaque uint32, names []string) []byte {
	n := 2
	for _, k := range names {
		n += 2 + len(k)
	}
	if len(names) > 0xffff {
		panic("wire: more than 65535 names")
	}
	dst = appendRequestHeader(dst, OpUniqueCount, opaque, n)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(names)))
	for _, k := range names {
		dst = appendName(dst, k)
	}
	return dst
}

// ParseUniqueCount decodes a UCount request body: 1 to MaxUnionNames
// names of 1 to MaxUniqueFieldLen bytes, which alias body. Every error
// wraps ErrInvalid.
func ParseUniqueCount(body []byte) ([][]byte, error) {
	if len(body) < 2 {
		return nil, errShortBody
	}
	n := int(binary.BigEndian.Uint16(body))
	if n < 1 || n > MaxUnionNames {
		return nil, errNameCount
	}
	rest := body[2:]
	names := make([][]byte, n)
	var err error
	for i := range names {
		if names[i], rest, err = cutField(rest, errEmptyName, errNameTooLong); err != nil {
			return nil, err
		}
		if len(names[i]) > MaxUniqueFieldLen {
			return nil, errFieldLong
		}
	}
	return names, nil
}

// AppendFlag appends a successful response whose body is one flag byte,
// 1 for true: the answer to UAdd (changed).
func AppendFlag(dst []byte, op Opcode, opaque uint32, flag bool) []byte {
	dst = appendResponseHeader(dst, op, StatusOK, opaque, 1)
	if flag {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// ParseFlag decodes the 1-byte body of a successful UAdd response.
func ParseFlag(body []byte) (bool, error) {
	if len(body) != 1 || body[0] > 1 {
		return false, fmt.Errorf("%w: %x, want one byte 0 or 1", ErrMalformed, body)
	}
	return body[0] == 1, nil
}
