package redistest

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

type ttyBuf struct{ bytes.Buffer }

func (*ttyBuf) Close() error { return nil }

// TestReportGoesWhereGoTestShowsIt: the line of variants run and skipped
// is always in the test binary's output (go test -v prints it, and a
// failing package's output), and on the terminal too when Main asks (no
// -v, variants skipped) and there is one: before, it went to the terminal
// alone when there was one, so a log of go test -v never had it.
func TestReportGoesWhereGoTestShowsIt(t *testing.T) {
	const line = "pkg: skipped 3 real-server variants"
	for _, tt := range []struct {
		name            string
		toTerminal, tty bool
		wantOut, want   bool
	}{
		{"-v or nothing skipped, a terminal", false, true, true, false},
		{"-v or nothing skipped, no terminal", false, false, true, false},
		{"no -v and skipped, a terminal", true, true, true, true},
		{"no -v and skipped, no terminal (CI)", true, false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			term := &ttyBuf{}
			open := func() (io.WriteCloser, error) {
				if !tt.tty {
					return nil, errors.New("no terminal")
				}
				return term, nil
			}
			report(line, tt.toTerminal, &out, open)
			if got := out.String() == line+"\n"; got != tt.wantOut {
				t.Errorf("output %q", out.String())
			}
			if got := term.String() == line+"\n"; got != tt.want {
				t.Errorf("terminal %q", term.String())
			}
		})
	}
}
