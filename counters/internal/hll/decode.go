package hll

import (
	"errors"
	"fmt"
)

// ErrFormat is wrapped by the errors of Decode.
var ErrFormat = errors.New("hll: not a Redis HyperLogLog")

// Redis's HyperLogLog string: a 16-byte header ("HYLL", the encoding, 3
// unused bytes, an 8-byte cached cardinality) and the registers.
const (
	hdrSize     = 16
	encDense    = 0
	encSparse   = 1
	regBits     = 6
	denseSize   = hdrSize + (Registers*regBits+7)/8
	registerMax = 1<<regBits - 1
)

// DecodeInto raises each register of regs to at least that of v, the value
// Redis stores for a HyperLogLog (GET of a key written by PFADD), in
// either of Redis's encodings.
func DecodeInto(regs *[Registers]uint8, v []byte) error {
	if len(v) < hdrSize || string(v[:4]) != "HYLL" {
		return fmt.Errorf("%w: bad header", ErrFormat)
	}
	switch v[4] {
	case encDense:
		if len(v) != denseSize {
			return fmt.Errorf("%w: dense value of %d bytes, want %d", ErrFormat, len(v), denseSize)
		}
		p := v[hdrSize:]
		for i := range Registers {
			bit := i * regBits
			b0 := uint(p[bit/8])
			var b1 uint
			if bit/8+1 < len(p) {
				b1 = uint(p[bit/8+1])
			}
			fb := uint(bit & 7)
			regs[i] = max(regs[i], uint8((b0>>fb|b1<<(8-fb))&registerMax))
		}
		return nil
	case encSparse:
		return decodeSparse(regs, v[hdrSize:])
	}
	return fmt.Errorf("%w: encoding %d", ErrFormat, v[4])
}

// decodeSparse reads Redis's sparse opcodes: ZERO (00xxxxxx: xxxxxx+1 zero
// registers), XZERO (01xxxxxx yyyyyyyy: 14-bit length+1 zero registers)
// and VAL (1vvvvvxx: xx+1 registers of value vvvvv+1).
func decodeSparse(regs *[Registers]uint8, p []byte) error {
	idx := 0
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch {
		case b&0xc0 == 0x00:
			idx += int(b&0x3f) + 1
		case b&0xc0 == 0x40:
			if i+1 >= len(p) {
				return fmt.Errorf("%w: truncated XZERO", ErrFormat)
			}
			idx += (int(b&0x3f)<<8 | int(p[i+1])) + 1
			i++
		default:
			val := (b>>2)&0x1f + 1
			n := int(b&0x3) + 1
			if idx+n > Registers {
				return fmt.Errorf("%w: sparse run past the registers", ErrFormat)
			}
			for j := idx; j < idx+n; j++ {
				regs[j] = max(regs[j], val)
			}
			idx += n
		}
		if idx > Registers {
			return fmt.Errorf("%w: sparse run past the registers", ErrFormat)
		}
	}
	if idx != Registers {
		return fmt.Errorf("%w: sparse value covers %d registers, want %d", ErrFormat, idx, Registers)
	}
	return nil
}
