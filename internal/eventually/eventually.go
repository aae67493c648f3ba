// Package eventually is the tests' one way to wait for something another
// goroutine or process brings about: poll a condition until it holds or a
// time limit passes. Inside a testing/synctest bubble the limit and the
// polling run on the bubble's clock.
package eventually

import (
	"testing"
	"time"
)

// maxInterval bounds the pause between two checks: short enough not to
// slow a test, long enough not to spin on a loaded machine.
const maxInterval = 20 * time.Millisecond

// True polls cond until it returns true, failing t with what if it does
// not within that long. cond runs at least once, and once more at the
// limit.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
}

// NoError polls check until it returns nil, failing t with what and the
// last error if it does not within that long.
func NoError(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	var last error
	if !poll(within, func() bool { last = check(); return last == nil }) {
		t.Fatalf("%s: not within %v: %v", what, within, last)
	}
}

// poll reports whether cond held before within passed, checking it every
// millisecond at first and less often as the wait grows.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; ; pause = min(2*pause, maxInterval) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
	}
}
