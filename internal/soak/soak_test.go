package soak_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/soak"
)

// named is a testing.TB with a name of its own that records a skip or a
// failure instead of ending the test that uses it.
type named struct {
	testing.TB
	name            string
	skipped, failed string
}

func (n *named) Helper()                           {}
func (n *named) Name() string                      { return n.name }
func (n *named) Skipf(format string, args ...any)  { n.skipped = fmt.Sprintf(format, args...) }
func (n *named) Fatalf(format string, args ...any) { n.failed = fmt.Sprintf(format, args...) }

func TestSkippedUnlessAsked(t *testing.T) {
	t.Setenv(soak.Env, "")
	n := &named{TB: t, name: "TestSoakFailover/cluster"}
	soak.Test(n)
	if n.failed != "" || !strings.Contains(n.skipped, soak.Command) {
		t.Fatalf("without %s: skipped %q, failed %q; want a skip naming %q", soak.Env, n.skipped, n.failed, soak.Command)
	}
}

func TestRunsWhenAsked(t *testing.T) {
	t.Setenv(soak.Env, "1")
	n := &named{TB: t, name: "TestSoakFailover"}
	soak.Test(n)
	if n.failed != "" || n.skipped != "" {
		t.Fatalf("with %s=1: skipped %q, failed %q; want it to run", soak.Env, n.skipped, n.failed)
	}
}

func TestNameMustSaySoak(t *testing.T) {
	for _, env := range []string{"", "1"} {
		t.Setenv(soak.Env, env)
		n := &named{TB: t, name: "TestFailover/Soak"} // a subtest's name is not what -run Soak matches
		soak.Test(n)
		if !strings.Contains(n.failed, `"Soak"`) {
			t.Fatalf("%s=%q, a soak named %s: failed %q; want a failure naming the pattern", soak.Env, env, n.name, n.failed)
		}
	}
}

// TestCIRunsTheSoaks: .ci/run runs Command on a line of its own, and the
// README says how to run the soaks with it, word for word.
func TestCIRunsTheSoaks(t *testing.T) {
	for _, f := range []string{"../../.ci/run", "../../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(soak.Command) + `$`).Match(b) {
			t.Errorf("%s has no line %q", f, soak.Command)
		}
	}
}
