// Package soak is the tests' one rule for soaks: tests that show what the
// program does over real time (a failover, a stall or an outage lasting
// seconds, an idle minute, a flood that fills a Redis). The suite leaves
// them out unless VKCOUNTER_TEST_SOAK=1 is set, so that `go test ./...`
// stays short; .ci/run runs them in a step of their own.
//
// A soak's top-level test name contains "Soak", so that one -run pattern
// selects every soak of every package:
//
//	VKCOUNTER_TEST_SOAK=1 go test -race -count=1 -timeout 20m -run Soak ./...
package soak

import (
	"os"
	"strings"
	"testing"
)

// Env is the variable that runs the soaks when set to 1.
const Env = "VKCOUNTER_TEST_SOAK"

// Pattern is what every soak's top-level test name contains: the -run
// pattern that selects them all.
const Pattern = "Soak"

// Command runs every soak of the module.
const Command = Env + "=1 go test -race -count=1 -timeout 20m -run " + Pattern + " ./..."

// Test skips t unless VKCOUNTER_TEST_SOAK=1, saying how to run it. It
// fails t if its top-level name does not contain "Soak": such a soak
// would not be selected by Command, and would run nowhere.
func Test(t testing.TB) {
	t.Helper()
	if top, _, _ := strings.Cut(t.Name(), "/"); !strings.Contains(top, Pattern) {
		t.Fatalf("soak.Test in %s: a soak's top-level name contains %q, so that -run %s selects it", top, Pattern, Pattern)
	}
	if os.Getenv(Env) != "1" {
		t.Skipf("a soak over real time, left out of the suite: run it with %s", Command)
	}
}
