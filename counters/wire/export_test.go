package wire

import "slices"

// BufferCap returns the capacity of r's body buffer, for tests of what a
// Reader keeps between frames.
func BufferCap(r *Reader) int { return cap(r.buf) }

// Statuses returns every status this codec knows, in ascending order.
func Statuses() []Status {
	out := make([]Status, 0, len(statusLabels))
	for s := range statusLabels {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
