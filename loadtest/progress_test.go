package loadtest

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgressPlainWhenNotATerminal: written to something other than a
// terminal (here a buffer, as a CI log or a file), progress is whole
// lines, without the carriage returns that rewrite a terminal line.
func TestProgressPlainWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	n := 0
	p := startProgress(&buf, func() string { n++; return "requests 5" })
	p.Stop()
	if got := buf.String(); got != "requests 5\n" || strings.Contains(got, "\r") {
		t.Fatalf("progress wrote %q, want one plain line", got)
	}
}
