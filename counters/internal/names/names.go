// Package names holds the name rule the counter kinds share (access,
// participant, window, unique): a counter name is any byte string of 1 to
// MaxLen bytes. The kinds export it as their MaxNameLen and answer a bad
// name with their own ErrInvalidName, so an error still says which kind
// refused it.
//
// The codec (counters/wire) bounds the extension opcodes' bodies by it
// (wire.MaxFieldLen) and checks names and keys by it before they are sent
// (wire.CheckKindName, wire.CheckKey); the resource counters keep their
// own, longer limit (resource.MaxNameLen).
package names

import "fmt"

// MaxLen is the length limit of a counter name, in bytes. It keeps a name
// well inside the counter protocol's 16-bit name length.
const MaxLen = 255

// Check returns nil if name is 1 to MaxLen bytes, else an error wrapping
// invalid (the caller's ErrInvalidName) that gives the name's length and
// the range.
func Check(name string, invalid error) error {
	if len(name) == 0 || len(name) > MaxLen {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", invalid, len(name), MaxLen)
	}
	return nil
}
