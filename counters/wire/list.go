package wire

import (
	"encoding/binary"
	"fmt"
)

// This file holds the bodies of List, the prefix listing of access
// counters, answered like Dump with a series of responses:
//
//	request   limit (2, 1 to 1000), prefix len (2), prefix (0 to 255 bytes),
//	          after len (2), after (0 to 255 bytes)
//	entry     total (8), name len (2), name: one response per counter
//	end       more (1): 1 when more counters follow after the last entry
//
// The counters are those whose names start with prefix and sort after
// after (byte order); a client asks for the next page with after set to
// the last name it got.

var errListField = fmt.Errorf("%w: prefix or after longer than %d bytes", ErrInvalid, MaxListField)

// AppendList appends a List request. It only panics on a prefix or after
// longer than MaxNameLen.
func AppendList(dst []byte, opaque uint32, prefix, after string, limit uint16) []byte {
	dst = appendRequestHeader(dst, OpList, opaque, 2+2+len(prefix)+2+len(after))
	dst = binary.BigEndian.AppendUint16(dst, limit)
	dst = appendName(dst, prefix)
	return appendName(dst, after)
}

// A ListRequest is a decoded List request body.
type ListRequest struct {
	// Limit is as sent; the store checks its range.
	Limit uint16
	// Prefix and After alias the body they were parsed from; either may
	// be empty.
	Prefix, After []byte
}

// ParseList decodes a List request body. Every error wraps ErrInvalid.
func ParseList(body []byte) (ListRequest, error) {
	if len(body) < 2 {
		return ListRequest{}, errShortBody
	}
	req := ListRequest{Limit: binary.BigEndian.Uint16(body)}
	var err error
	rest := body[2:]
	if req.Prefix, rest, err = cutMaybeEmpty(rest); err != nil {
		return ListRequest{}, err
	}
	if req.After, _, err = cutMaybeEmpty(rest); err != nil {
		return ListRequest{}, err
	}
	return req, nil
}

// cutMaybeEmpty splits off a length-prefixed field of 0 to MaxListField
// bytes.
func cutMaybeEmpty(b []byte) (field, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, errShortBody
	}
	n := int(binary.BigEndian.Uint16(b))
	switch {
	case n > len(b)-2:
		return nil, nil, errNameTooLong
	case n > MaxListField:
		return nil, nil, errListField
	}
	return b[2 : 2+n], b[2+n:], nil
}

// AppendListEntry appends one successful List response listing a
// counter. It panics on a name longer than MaxNameLen.
func AppendListEntry(dst []byte, opaque uint32, name string, total uint64) []byte {
	dst = appendResponseHeader(dst, OpList, StatusOK, opaque, 8+2+len(name))
	dst = binary.BigEndian.AppendUint64(dst, total)
	return appendName(dst, name)
}

// AppendListEnd appends the response that ends a List series: more is
// true when counters follow the last one listed.
func AppendListEnd(dst []byte, opaque uint32, more bool) []byte {
	return AppendFlag(dst, OpList, opaque, more)
}

// ParseListEntry decodes the body of a List entry response.
func ParseListEntry(body []byte) (name string, total uint64, err error) {
	if len(body) < 10 {
		return "", 0, fmt.Errorf("%w: list entry of %d bytes", ErrMalformed, len(body))
	}
	if n := int(binary.BigEndian.Uint16(body[8:10])); n != len(body)-10 {
		return "", 0, fmt.Errorf("%w: list entry name of %d bytes with %d left", ErrMalformed, n, len(body)-10)
	}
	return string(body[10:]), binary.BigEndian.Uint64(body), nil
}
