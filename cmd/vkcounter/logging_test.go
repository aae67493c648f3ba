package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// TestConsoleLogPlainOffTerminal: LOG_FORMAT=console writes no colour
// codes where the output is not a terminal.
func TestConsoleLogPlainOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.Config{LogLevel: "info", LogFormat: "console"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("k", "v").Msg("hello")
	if got := buf.String(); !strings.Contains(got, "hello") || strings.Contains(got, "\x1b[") {
		t.Fatalf("console line %q: want it without escape codes", got)
	}
}

// TestRedisLogRoutedThroughZerolog: go-redis's own lines arrive as JSON
// warnings naming their origin, rate-limited like every repeated failure.
func TestRedisLogRoutedThroughZerolog(t *testing.T) {
	var buf bytes.Buffer
	l := redisLogger{ratelog.New(zerolog.New(&buf).With().Str("component", "go-redis").Logger(), failureLogEvery)}
	l.Printf(context.Background(), "redis: %s:%d: connection pool: failed to dial after %d attempts: %s\n", "127.0.0.1", 1, 5, "refused")
	l.Printf(context.Background(), "redis: again")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1 (the second within the period held back):\n%s", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("not JSON: %s", lines[0])
	}
	if line["level"] != "warn" || line["component"] != "go-redis" ||
		line["message"] != "redis: 127.0.0.1:1: connection pool: failed to dial after 5 attempts: refused" {
		t.Fatalf("line %v", line)
	}
}

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
