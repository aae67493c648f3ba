package memcap

import "slices"

// sizeClasses are the Go runtime's allocation size classes up to 32 KiB
// (runtime/sizeclasses.go): an allocation takes the smallest class that
// holds it.
var sizeClasses = []int64{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144,
	6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384,
	18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768,
}

// pageSize is the granule of allocations above the largest size class.
const pageSize = 8192

// Alloc returns the bytes the runtime takes for an allocation of n bytes:
// n rounded up to its size class (0 for n <= 0).
func Alloc(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if i, _ := slices.BinarySearch(sizeClasses, n); i < len(sizeClasses) {
		return sizeClasses[i]
	}
	return (n + pageSize - 1) / pageSize * pageSize
}

// String returns the bytes a copy of a string of n bytes takes.
func String(n int) int64 { return Alloc(int64(n)) }

// Map sizes, measured with Go 1.26's maps: a map's header, and the group
// of 8 slots (with a control byte each) that a map of up to 8 entries
// takes. Past 8 entries a map's tables double as they fill to 7/8, so
// that they are 7/16 to 7/8 full: an entry then takes its slot 1.14 to
// 2.3 times (measured: 1.4 to 2.24 at 10^2 to 10^6 entries), 15/8 here.
const (
	mapHeader       = 48
	mapGroupSlots   = 8
	mapSpreadNum    = 15 // an entry takes its slot × 15/8
	mapSpreadDen    = 8
	mapSlotOverhead = 1 // the control byte
)

// Map returns the estimated bytes of a map of n entries whose key and
// value take slot bytes together (a string key is 16, an int64 or a
// pointer 8), the keys' own data not included.
func Map(n int, slot int64) int64 {
	switch {
	case n <= 0:
		return mapHeader
	case n <= mapGroupSlots:
		return mapHeader + Alloc(mapGroupSlots*(slot+mapSlotOverhead))
	}
	return mapHeader + int64(n)*MapEntry(slot)
}

// MapEntry returns the estimated bytes one entry adds to a large map
// whose key and value take slot bytes together.
func MapEntry(slot int64) int64 { return (slot + mapSlotOverhead) * mapSpreadNum / mapSpreadDen }
