package loadtest

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/internal/tty"
)

// A progress reports a run's status until stopped: on a terminal it
// rewrites one line in place (with \r) every progressEvery; elsewhere (a
// file, a pipe, a CI log) it writes a plain line every plainProgressEvery.
// Its line function is called from the progress goroutine.
type progress struct {
	w    io.Writer
	line func() string
	tty  bool

	stop chan struct{}
	done sync.WaitGroup
	last int // length of the last line, to blank out what a shorter one leaves
}

// startProgress starts rewriting line() on w every progressEvery; with a
// nil w it does nothing.
func startProgress(w io.Writer, line func() string) *progress {
	p := &progress{w: w, line: line, tty: tty.Is(w), stop: make(chan struct{})}
	if w == nil {
		return p
	}
	every := plainProgressEvery
	if p.tty {
		every = progressEvery
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.print()
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

func (p *progress) print() {
	s := p.line()
	if !p.tty {
		fmt.Fprintln(p.w, s)
		return
	}
	pad := max(p.last-len(s), 0)
	p.last = len(s)
	fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
}

// Stop stops the updates, prints the line a last time and ends it with a
// newline. It may be called once.
func (p *progress) Stop() {
	if p.w == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	p.print()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// sinceOr is the time since start, or *ended (nanoseconds) once that is
// set: a run's rates are over the time spent sending, and the progress
// line stops that clock where the report does.
func sinceOr(start time.Time, ended *atomic.Int64) time.Duration {
	if d := ended.Load(); d > 0 {
		return time.Duration(d)
	}
	return time.Since(start)
}

// statusLine is the progress line of both tools.
func statusLine(phase string, done, total int64, elapsed time.Duration, errors int64, p99 time.Duration) string {
	of := ""
	if total > 0 {
		of = fmt.Sprintf("/%d", total)
	}
	return fmt.Sprintf("%s %d%s  %.0f/s  errors %d  p99 %s", phase, done, of, perSecond(done, elapsed), errors, fmtDuration(p99))
}
