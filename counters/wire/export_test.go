package wire

// BufferCap returns the capacity of r's body buffer, for tests of what a
// Reader keeps between frames.
func BufferCap(r *Reader) int { return cap(r.buf) }
