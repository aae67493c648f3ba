// Package runlist owns the list-and-total layout of a sliding-window count
// in Redis and the Lua functions that keep it (count.lua): per counter, a
// list of the seconds it occurred in, oldest first and run-length encoded
// ("sec", or "sec:n" for n occurrences), a running total of the list, and
// optionally a dedupe key per message remembering its answer.
//
// counters/window's Redis store keeps its window counters in this layout:
// it puts Lua() in front of its own scripts and builds its own key names;
// this package holds no state and sends nothing.
package runlist

import (
	_ "embed"
	"strconv"
	"time"
)

//go:embed count.lua
var lua string

// Lua is the library a script of the layout starts with (count.lua): it
// defines parse, last, seen, clock, trim and count, and is not a script by
// itself. count.lua says what each function does.
func Lua() string { return lua }

// MaxUnix is the latest second a script of the layout is given (the end
// of year 9999): Lua prints numbers with 14 significant digits, so larger
// ones would not survive a round trip through a list entry.
const MaxUnix = 253402300799

// TimeArg returns at, truncated to the second, as the time argument that
// count.lua's clock reads (a unix second in decimal), and false for a time
// outside 1970 to 9999 (after MaxUnix).
func TimeArg(at time.Time) (string, bool) {
	u := at.Unix()
	if u < 0 || u > MaxUnix {
		return "", false
	}
	return strconv.FormatInt(u, 10), true
}
