package loadtest

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// A progress rewrites one status line on a terminal, with \r, until
// stopped. Its line function is called from the progress goroutine.
type progress struct {
	w    io.Writer
	line func() string

	stop chan struct{}
	done sync.WaitGroup
	last int // length of the last line, to blank out what a shorter one leaves
}

// startProgress starts rewriting line() on w every progressEvery; with a
// nil w it does nothing.
func startProgress(w io.Writer, line func() string) *progress {
	p := &progress{w: w, line: line, stop: make(chan struct{})}
	if w == nil {
		return p
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(progressEvery)
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
	fmt.Fprintln(p.w)
}

// statusLine is the progress line of both tools.
func statusLine(phase string, done, total int64, elapsed time.Duration, errors int64, p99 time.Duration) string {
	of := ""
	if total > 0 {
		of = fmt.Sprintf("/%d", total)
	}
	return fmt.Sprintf("%s %d%s  %.0f/s  errors %d  p99 %s", phase, done, of, perSecond(done, elapsed), errors, fmtDuration(p99))
}
