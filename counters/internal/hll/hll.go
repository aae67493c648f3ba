// Package hll is a HyperLogLog with Redis's parameters, hash and
// estimator, so that the same elements give the same registers and the
// same estimate as Redis's PFADD and PFCOUNT: 2^14 registers, MurmurHash64A
// with Redis's seed, and Ertl's improved estimator that Redis uses since
// 5.0 (standard error 0.81 %).
//
// A Sketch starts sparse (a sorted list of the registers that are not
// zero, a few bytes per element added) and turns dense (one byte per
// register, 16 KiB) once that list would pass 4 KiB. The encoding does not
// change any register, so it never changes an estimate. Decode reads a
// value Redis stores for a HyperLogLog (GET of a PFADD key), sparse or
// dense, so sketches from Redis can be merged with these.
package hll

import (
	"math"
	"math/bits"
	"slices"
)

// Redis's HyperLogLog parameters.
const (
	// P is the number of index bits.
	P = 14
	// Registers is the number of registers, 2^P.
	Registers = 1 << P
	// q is the number of hash bits left for the run of zeros.
	q = 64 - P
	// seed is Redis's MurmurHash64A seed for HyperLogLog elements.
	seed = 0xadc83b19
	// maxSparse is the most sparse entries before the sketch turns dense.
	maxSparse = 1024
)

// A Sketch estimates the number of distinct elements added to it. The
// zero value is an empty sketch. It is not safe for concurrent use.
type Sketch struct {
	// sparse holds index<<8 | value of every non-zero register, by index,
	// while dense is nil.
	sparse []uint32
	dense  *[Registers]uint8
}

// Add adds an element and reports whether a register changed (Redis's
// PFADD answer: the estimate may have changed).
func (s *Sketch) Add(elem []byte) bool {
	idx, val := patLen(elem)
	return s.set(idx, val)
}

// AddString is Add for a string.
func (s *Sketch) AddString(elem string) bool {
	idx, val := patLenString(elem)
	return s.set(idx, val)
}

// set raises register idx to val and reports whether it rose.
func (s *Sketch) set(idx uint32, val uint8) bool {
	if s.dense != nil {
		if s.dense[idx] >= val {
			return false
		}
		s.dense[idx] = val
		return true
	}
	i, found := slices.BinarySearchFunc(s.sparse, idx, func(e, idx uint32) int { return int(e>>8) - int(idx) })
	if found {
		if uint8(s.sparse[i]) >= val {
			return false
		}
		s.sparse[i] = idx<<8 | uint32(val)
		return true
	}
	if len(s.sparse) >= maxSparse {
		s.toDense()
		s.dense[idx] = val
		return true
	}
	s.sparse = slices.Insert(s.sparse, i, idx<<8|uint32(val))
	return true
}

func (s *Sketch) toDense() {
	s.dense = new([Registers]uint8)
	for _, e := range s.sparse {
		s.dense[e>>8] = uint8(e)
	}
	s.sparse = nil
}

// Empty reports whether nothing was ever added.
func (s *Sketch) Empty() bool { return s.dense == nil && len(s.sparse) == 0 }

// Size returns the bytes the registers take: 4 per sparse entry, or
// Registers when dense.
func (s *Sketch) Size() int {
	if s.dense != nil {
		return Registers
	}
	return 4 * cap(s.sparse)
}

// GrowthBound returns the most Size can rise by adding n elements: to the
// dense size if they may turn the sketch dense, else to a sparse array
// twice as long as the entries it may then hold.
func (s *Sketch) GrowthBound(n int) int {
	switch {
	case s.dense != nil:
		return 0
	case len(s.sparse)+n > maxSparse:
		return Registers - s.Size()
	case len(s.sparse)+n <= cap(s.sparse):
		return 0
	}
	return 8*(len(s.sparse)+n) - s.Size()
}

// MergeInto raises each register of regs to at least s's.
func (s *Sketch) MergeInto(regs *[Registers]uint8) {
	if s.dense != nil {
		for i, v := range s.dense {
			regs[i] = max(regs[i], v)
		}
		return
	}
	for _, e := range s.sparse {
		regs[e>>8] = max(regs[e>>8], uint8(e))
	}
}

// Estimate returns the estimated number of distinct elements added.
func (s *Sketch) Estimate() uint64 {
	var hist [64]int
	if s.dense != nil {
		for _, v := range s.dense {
			hist[v]++
		}
	} else {
		hist[0] = Registers - len(s.sparse)
		for _, e := range s.sparse {
			hist[uint8(e)]++
		}
	}
	return estimate(&hist)
}

// Estimate returns the estimate of registers, such as a union merged with
// MergeInto.
func Estimate(regs *[Registers]uint8) uint64 {
	var hist [64]int
	for _, v := range regs {
		hist[v]++
	}
	return estimate(&hist)
}

// estimate is Redis's hllCount on a histogram of register values.
func estimate(hist *[64]int) uint64 {
	const m = float64(Registers)
	z := m * tau((m-float64(hist[q+1]))/m)
	for j := q; j >= 1; j-- {
		z += float64(hist[j])
		z *= 0.5
	}
	z += m * sigma(float64(hist[0])/m)
	return uint64(math.Round(0.721347520444481703680 * m * m / z))
}

func sigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zPrime := z
		z += x * y
		y += y
		if zPrime == z {
			return z
		}
	}
}

func tau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zPrime := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if zPrime == z {
			return z / 3
		}
	}
}

// patLen returns the register index and the value (the run of zeros + 1)
// of an element, as Redis's hllPatLen.
func patLen(elem []byte) (uint32, uint8) { return split(murmur64A(elem, seed)) }

func patLenString(elem string) (uint32, uint8) {
	return split(murmur64A(elem, seed))
}

func split(h uint64) (uint32, uint8) {
	idx := uint32(h & (Registers - 1))
	h >>= P
	h |= 1 << q
	return idx, uint8(bits.TrailingZeros64(h) + 1)
}

// murmur64A is Austin Appleby's MurmurHash64A, as Redis computes it on
// little-endian machines.
func murmur64A[T []byte | string](key T, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	n := len(key)
	h := seed ^ (uint64(n) * m)
	for len(key) >= 8 {
		k := uint64(key[0]) | uint64(key[1])<<8 | uint64(key[2])<<16 | uint64(key[3])<<24 |
			uint64(key[4])<<32 | uint64(key[5])<<40 | uint64(key[6])<<48 | uint64(key[7])<<56
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		key = key[8:]
	}
	if len(key) > 0 {
		for i := len(key) - 1; i >= 0; i-- {
			h ^= uint64(key[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}
