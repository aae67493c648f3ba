package eventually_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
)

// recorder is a testing.TB that records a failure instead of ending the
// test that uses it.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestTrueWaitsForTheCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var set atomic.Bool
		time.AfterFunc(3*time.Second, func() { set.Store(true) })
		start := time.Now()
		eventually.True(t, 5*time.Second, "set", set.Load)
		if took := time.Since(start); took < 3*time.Second || took > 3*time.Second+25*time.Millisecond {
			t.Errorf("returned after %v, want just past 3s", took)
		}
	})
}

func TestTrueFailsAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		calls := 0
		start := time.Now()
		eventually.True(r, time.Second, "never", func() bool { calls++; return false })
		if took := time.Since(start); took != time.Second {
			t.Errorf("gave up after %v, want 1s", took)
		}
		if r.failed != "never: not within 1s" {
			t.Errorf("failure %q", r.failed)
		}
		if calls < 2 {
			t.Errorf("cond checked %d times", calls)
		}
	})
}

func TestNoErrorSaysTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		n := 0
		eventually.NoError(r, 100*time.Millisecond, "reading", func() error {
			n++
			if n < 3 {
				return errors.New("first")
			}
			return errors.New("later")
		})
		if r.failed != "reading: not within 100ms: later" {
			t.Errorf("failure %q", r.failed)
		}
		r.failed = ""
		eventually.NoError(r, time.Second, "ok", func() error { return nil })
		if r.failed != "" {
			t.Errorf("failed on nil: %q", r.failed)
		}
	})
}
