package bot

import (
	"testing"
	"time"
)

// TestAddedSendersDue: with no sender to add, the day's estimate is read
// once a minute, and at once after the set began again (a new day, the
// re-add period, the counter's loss seen).
func TestAddedSendersDue(t *testing.T) {
	var s addedSenders
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	day := "vk.users:2026-11-29"
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		at        time.Duration
		day       string
		senders   []string
		estimate  int64 // what the counter answers, when read
		wantFresh int
		wantDue   bool // when none is fresh: the estimate is read
	}{
		{0, day, []string{"1", "2"}, 2, 2, true},
		{time.Second, day, []string{"1"}, 2, 0, false},
		{59 * time.Second, day, []string{"2"}, 2, 0, false},
		{time.Minute, day, []string{"2"}, 2, 0, true},                                       // a minute after the last reading
		{90 * time.Second, day, []string{"3"}, 3, 1, true},                                  // a new sender: added, the estimate read with it
		{100 * time.Second, day, []string{"3"}, 3, 0, false},                                // read 10 s ago
		{110 * time.Second, day, []string{"4"}, 1, 1, true},                                 // the counter lost them: 1 of 4
		{120 * time.Second, day, []string{"1"}, 2, 1, true},                                 // the set began again: 1 added again
		{130 * time.Second, "vk.users:2026-11-30", []string{"1"}, 1, 1, true},               // a new day
		{130*time.Second + activityReAdd, "vk.users:2026-11-30", []string{"1"}, 1, 1, true}, // the re-add period since the new day
	}
	for i, st := range steps {
		now := at(st.at)
		fresh := s.fresh(st.day, now, st.senders)
		if len(fresh) != st.wantFresh {
			t.Fatalf("step %d: %d fresh senders %q, want %d", i, len(fresh), fresh, st.wantFresh)
		}
		read := len(fresh) > 0 || s.due(now)
		if len(fresh) == 0 && read != st.wantDue {
			t.Fatalf("step %d: estimate due %v, want %v", i, read, st.wantDue)
		}
		if read {
			s.note(fresh, st.estimate, now)
		}
	}
}
