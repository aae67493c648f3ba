// Package ratelog keeps a repeated log line from flooding the log: a
// Logger lets one line through per period and counts the ones it held
// back, and the next line it lets through says how many.
package ratelog

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// A Logger writes at most one line per period to its zerolog.Logger. Use
// one Logger per kind of line (e.g. "activity batch failed"): lines of
// different kinds would hide each other. It is safe for concurrent use.
type Logger struct {
	log    zerolog.Logger
	period time.Duration
	now    func() time.Time

	mu         sync.Mutex // guards next and suppressed
	next       time.Time  // when the next line may be written
	suppressed int        // lines held back since the last one written
}

// New returns a Logger writing to log at most once per period.
func New(log zerolog.Logger, period time.Duration) *Logger {
	return &Logger{log: log, period: period, now: time.Now}
}

// SetClock replaces the clock, for tests.
func (l *Logger) SetClock(now func() time.Time) { l.now = now }

// Warn starts a warning line, or returns nil (on which zerolog's methods,
// Msg included, do nothing) while the period since the last line runs.
// A line let through after others were held back carries
// "suppressed": their number.
func (l *Logger) Warn() *zerolog.Event { return l.event(l.log.Warn) }

// Info is Warn at info level.
func (l *Logger) Info() *zerolog.Event { return l.event(l.log.Info) }

// Error is Warn at error level.
func (l *Logger) Error() *zerolog.Event { return l.event(l.log.Error) }

func (l *Logger) event(level func() *zerolog.Event) *zerolog.Event {
	l.mu.Lock()
	now := l.now()
	if now.Before(l.next) {
		l.suppressed++
		l.mu.Unlock()
		return nil
	}
	l.next = now.Add(l.period)
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	e := level()
	if n > 0 {
		e = e.Int("suppressed", n)
	}
	return e
}
