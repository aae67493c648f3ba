package history_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/history"
)

// t0 is the start of a minute.
var t0 = time.Unix(1_700_000_040, 0)

func at(minutes, seconds int) time.Time {
	return t0.Add(time.Duration(minutes)*time.Minute + time.Duration(seconds)*time.Second)
}

// TestPerMinute: growth per minute from totals sampled every 10 s, the
// minute under way up to the live total, unknown minutes -1, and the ring
// reused after an hour.
func TestPerMinute(t *testing.T) {
	r := history.New(2)
	total := int64(0)
	for s := 0; s < 3*60; s += 10 { // three minutes, 5 per 10 s in series 0
		r.Observe(at(0, s), []int64{total, 7})
		total += 5
	}
	got := r.PerMinute(at(2, 59), 0, total)
	want := append(slices.Repeat([]int64{-1}, 57), 30, 30, 30)
	if !slices.Equal(got, want) {
		t.Errorf("PerMinute = %v, want %v", got, want)
	}
	if got := r.PerMinute(at(2, 59), 1, 7); got[59] != 0 || got[58] != 0 {
		t.Errorf("a flat series grew: %v", got[57:])
	}
	if n, ok := r.LastMinute(at(2, 30), 0); !ok || n != 30 {
		t.Errorf("LastMinute = %d, %v; want 30", n, ok)
	}
	if _, ok := r.LastMinute(at(0, 30), 0); ok {
		t.Error("LastMinute known before a whole minute was sampled")
	}
	// A gap: minute 3 never sampled; minutes 4 and on are.
	r.Observe(at(4, 0), []int64{total + 100, 7})
	got = r.PerMinute(at(4, 30), 0, total+110)
	if got[57] != -1 || got[58] != -1 || got[59] != 10 {
		t.Errorf("around the gap: %v, want -1, -1, 10", got[57:])
	}
	// An hour later every old slot is stale.
	r.Observe(at(70, 0), []int64{total + 500, 7})
	got = r.PerMinute(at(70, 1), 0, total+501)
	if want := append(slices.Repeat([]int64{-1}, 59), 1); !slices.Equal(got, want) {
		t.Errorf("an hour later: %v", got)
	}
}

// TestObserveKeepsMinuteStart: the first totals of a minute stay.
func TestObserveKeepsMinuteStart(t *testing.T) {
	r := history.New(1)
	r.Observe(at(0, 1), []int64{10})
	r.Observe(at(0, 50), []int64{99})
	r.Observe(at(1, 0), []int64{100})
	if n, ok := r.LastMinute(at(1, 5), 0); !ok || n != 90 {
		t.Errorf("LastMinute = %d, %v; want 90", n, ok)
	}
}
