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
	"github.com/vkcounter/vkcounter/internal/service"
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
	l := redisLogger{ratelog.New(zerolog.New(&buf).With().Str("component", "go-redis").Logger(), service.FailureLogEvery)}
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
