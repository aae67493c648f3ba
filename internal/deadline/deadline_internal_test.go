package deadline

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestSharedBounds, on the bubble's clock: a call gets a context
// ending d+slack after it; a call up to slack later shares it, one a
// nanosecond past that gets a new one.
func TestSharedBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewShared(6400 * time.Millisecond) // slack 100 ms
		start := time.Now()
		ctx := s.Context()
		deadline, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if got := deadline.Sub(start); got != s.d+s.slack {
			t.Fatalf("deadline %v from the call, want %v", got, s.d+s.slack)
		}
		time.Sleep(s.slack)
		if again := s.Context(); again != ctx {
			t.Error("a call at the end of the slack got another context; want the shared one")
		}
		time.Sleep(time.Nanosecond)
		later := s.Context()
		if later == ctx {
			t.Fatal("a call past the slack got the old context, which ends too soon")
		}
		if d, _ := later.Deadline(); time.Until(d) != s.d+s.slack {
			t.Errorf("new deadline %v from now, want %v", time.Until(d), s.d+s.slack)
		}
	})
}

// TestSharedEnds: the shared context ends at its deadline, and a
// call after it gets a live one.
func TestSharedEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewShared(20 * time.Millisecond)
		start := time.Now()
		ctx := s.Context()
		<-ctx.Done()
		if took := time.Since(start); took != s.d+s.slack {
			t.Errorf("the shared context ended after %v, want %v", took, s.d+s.slack)
		}
		if fresh := s.Context(); fresh.Err() != nil {
			t.Fatalf("a call after the deadline got an ended context: %v", fresh.Err())
		}
	})
}
