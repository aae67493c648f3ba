package headroom

import "time"

// SetClock replaces the guard's clock, for tests.
func (g *Guard) SetClock(now func() time.Time) { g.now = now }

// Parse is parse, for tests.
var Parse = parse

// Busy reports whether a background reading is under way.
func (g *Guard) Busy() bool { return g.reading.Load() }
