package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/ratelog"
	"github.com/vkcounter/vkcounter/internal/tty"
)

// newLogger returns the service's logger writing to w: JSON lines, or with
// LOG_FORMAT=console human-readable ones, coloured only when w is a
// terminal. Every line goes through the redactor of cfg's secrets
// (newRedactor), whatever logged it.
func newLogger(cfg config.Config, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		return zerolog.Logger{}, fmt.Errorf("LOG_LEVEL %q: want trace, debug, info, warn or error", cfg.LogLevel)
	}
	w = config.Redactor(cfg).Writer(w)
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !tty.Is(w)}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// redisLogger routes go-redis's own log lines (pool and reconnection
// messages) into the service's log as warnings, at most one per
// service.FailureLogEvery, so that a JSON log stays JSON and an outage does not
// flood it.
type redisLogger struct{ log *ratelog.Logger }

// Printf is go-redis's logging interface.
func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn().Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// quietRedisLog drops go-redis's own log lines, for a command that reports
// the error go-redis returns instead.
type quietRedisLog struct{}

// Printf is go-redis's logging interface.
func (quietRedisLog) Printf(context.Context, string, ...any) {}
