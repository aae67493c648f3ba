package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestServerErrorLogIsJSON: an http.Server's own lines (a failed accept)
// arrive as JSON warnings naming the server, rate-limited.
func TestServerErrorLogIsJSON(t *testing.T) {
	var buf bytes.Buffer
	l := serverErrorLog(zerolog.New(&buf), "HTTP_ADDR")
	l.Printf("http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 5ms")
	l.Printf("http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 10ms")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1 (the second within the period held back):\n%s", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("not JSON: %q", lines[0])
	}
	if line["level"] != "warn" || line["server"] != "HTTP_ADDR" || !strings.Contains(line["message"].(string), "too many open files") {
		t.Fatalf("line %v", line)
	}
}
