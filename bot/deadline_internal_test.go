package bot

import (
	"testing"
	"time"
)

func TestSharedDeadlineBounds(t *testing.T) {
	s := newSharedDeadline(6400 * time.Millisecond) // slack 100 ms
	before := time.Now()
	ctx := s.context()
	after := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	if deadline.Before(before.Add(s.d)) || deadline.After(after.Add(s.d+s.slack)) {
		t.Fatalf("deadline %v from the call, want between %v and %v", deadline.Sub(before), s.d, s.d+s.slack)
	}
	if again := s.context(); again != ctx {
		t.Error("a call right after got another context; want the shared one")
	}
	time.Sleep(s.slack + 10*time.Millisecond)
	later := s.context()
	if later == ctx {
		t.Fatal("a call past the slack got the old context, which ends too soon")
	}
	if d, _ := later.Deadline(); d.Before(time.Now().Add(s.d - 10*time.Millisecond)) {
		t.Errorf("new deadline %v from now, want at least %v", time.Until(d), s.d)
	}
}

func TestSharedDeadlineEnds(t *testing.T) {
	s := newSharedDeadline(20 * time.Millisecond)
	ctx := s.context()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the shared context did not end at its deadline")
	}
	if fresh := s.context(); fresh.Err() != nil {
		t.Fatalf("a call after the deadline got an ended context: %v", fresh.Err())
	}
}
