package ratelog_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/ratelog"
)

func TestOneLinePerPeriod(t *testing.T) {
	var buf bytes.Buffer
	l := ratelog.New(zerolog.New(&buf), 10*time.Second)
	now := time.Unix(1000, 0)
	l.SetClock(func() time.Time { return now })

	for range 12 { // twelve failures within the first second: one line
		l.Error().Err(errors.New("down")).Msg("batch failed")
		now = now.Add(80 * time.Millisecond)
	}
	now = now.Add(10 * time.Second) // the period has run: the next line says what was held back
	l.Error().Err(errors.New("down")).Msg("batch failed")
	l.Warn().Msg("held back")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`{"level":"error","error":"down","message":"batch failed"}`,
		`{"level":"error","suppressed":11,"error":"down","message":"batch failed"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%s\nwant %d", buf.String(), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %s\nwant    %s", i, lines[i], want[i])
		}
	}
}

func TestSafeForConcurrentUse(t *testing.T) {
	var buf bytes.Buffer
	l := ratelog.New(zerolog.New(zerolog.SyncWriter(&buf)), time.Hour)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				l.Warn().Msg("x")
			}
		}()
	}
	for range 8 {
		<-done
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines within one period, want 1", n)
	}
}
