package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// appendResponseHeader appends a response header for a body of n bytes.
func appendResponseHeader(dst []byte, op Opcode, st Status, opaque uint32, n int) []byte {
	return AppendHeader(dst, Header{Magic: MagicResponse, Opcode: op, Status: st, BodyLen: uint32(n), Opaque: opaque})
}

// AppendResponse appends a response with the given body to dst.
func AppendResponse(dst []byte, op Opcode, st Status, opaque uint32, body []byte) []byte {
	dst = appendResponseHeader(dst, op, st, opaque, len(body))
	return append(dst, body...)
}

// AppendError appends a response with status st and st.Message() as its
// body to dst.
func AppendError(dst []byte, op Opcode, st Status, opaque uint32) []byte {
	msg := st.Message()
	dst = appendResponseHeader(dst, op, st, opaque, len(msg))
	return append(dst, msg...)
}

// AppendUint32 appends a successful response whose body is the 4-byte v:
// the answer to Get (the consumption) and to Acquire (the resources
// requested).
func AppendUint32(dst []byte, op Opcode, opaque uint32, v uint32) []byte {
	dst = appendResponseHeader(dst, op, StatusOK, opaque, 4)
	return binary.BigEndian.AppendUint32(dst, v)
}

// ParseUint32 decodes the 4-byte body of a successful Get or Acquire
// response.
func ParseUint32(body []byte) (uint32, error) {
	if len(body) != 4 {
		return 0, fmt.Errorf("%w: %d bytes, want 4", ErrMalformed, len(body))
	}
	return binary.BigEndian.Uint32(body), nil
}

// A Stat is one name-value pair of a Stats response. Both are shorter than
// 64 KiB; Value is ASCII text, a decimal number for every stat the server
// sends.
type Stat struct {
	Name  string
	Value string
}

// Uint returns the value as a number, for the numeric stats.
func (s Stat) Uint() (uint64, error) {
	return strconv.ParseUint(s.Value, 10, 64)
}

// AppendStatsResponse appends a successful Stats response carrying stats to
// dst. It panics if a name or value is 64 KiB or longer.
func AppendStatsResponse(dst []byte, opaque uint32, stats []Stat) []byte {
	n := 0
	for _, s := range stats {
		if len(s.Name) > MaxNameLen || len(s.Value) > MaxNameLen {
			panic("wire: stat name or value of 64 KiB or more")
		}
		n += 4 + len(s.Name) + len(s.Value)
	}
	dst = appendResponseHeader(dst, OpStats, StatusOK, opaque, n)
	for _, s := range stats {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s.Name)))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s.Value)))
		dst = append(dst, s.Name...)
		dst = append(dst, s.Value...)
	}
	return dst
}

// ParseStats decodes the body of a successful Stats response.
func ParseStats(body []byte) ([]Stat, error) {
	var stats []Stat
	for len(body) > 0 {
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: stats: %d trailing bytes", ErrMalformed, len(body))
		}
		nl := int(binary.BigEndian.Uint16(body[0:2]))
		vl := int(binary.BigEndian.Uint16(body[2:4]))
		body = body[4:]
		if nl+vl > len(body) {
			return nil, fmt.Errorf("%w: stats: pair of %d bytes with %d left", ErrMalformed, nl+vl, len(body))
		}
		stats = append(stats, Stat{Name: string(body[:nl]), Value: string(body[nl : nl+vl])})
		body = body[nl+vl:]
	}
	return stats, nil
}

// A DumpEntry is one counter as listed by Dump.
type DumpEntry struct {
	Name string
	// Consumption is the resources acquired now.
	Consumption uint32
	// MaxConsumption is the highest consumption in the current statistics
	// interval.
	MaxConsumption uint32
}

// AppendDumpEntry appends one successful Dump response listing e to dst.
// The body is consumption (4), maximum consumption (4), name length (2),
// name: the layout libyrmcds parses, with no reserved field. It panics if
// the name is longer than MaxNameLen.
func AppendDumpEntry(dst []byte, opaque uint32, e DumpEntry) []byte {
	dst = appendResponseHeader(dst, OpDump, StatusOK, opaque, 10+len(e.Name))
	dst = binary.BigEndian.AppendUint32(dst, e.Consumption)
	dst = binary.BigEndian.AppendUint32(dst, e.MaxConsumption)
	return appendName(dst, e.Name)
}

// AppendDumpEnd appends the empty successful Dump response that ends a
// dump.
func AppendDumpEnd(dst []byte, opaque uint32) []byte {
	return appendResponseHeader(dst, OpDump, StatusOK, opaque, 0)
}

// ParseDumpEntry decodes the body of a non-final Dump response.
func ParseDumpEntry(body []byte) (DumpEntry, error) {
	if len(body) < 10 {
		return DumpEntry{}, fmt.Errorf("%w: dump entry of %d bytes", ErrMalformed, len(body))
	}
	n := int(binary.BigEndian.Uint16(body[8:10]))
	if n != len(body)-10 {
		return DumpEntry{}, fmt.Errorf("%w: dump entry name of %d bytes with %d left", ErrMalformed, n, len(body)-10)
	}
	return DumpEntry{
		Name:           string(body[10:]),
		Consumption:    binary.BigEndian.Uint32(body[0:4]),
		MaxConsumption: binary.BigEndian.Uint32(body[4:8]),
	}, nil
}
