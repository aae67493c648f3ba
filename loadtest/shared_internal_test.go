package loadtest

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSettleOversExcusesClosedHoldings: a count above the maximum is a
// problem unless the units of a connection the server closed, which may
// have been released between its last answer and the close, bring it
// within the maximum.
func TestSettleOversExcusesClosedHoldings(t *testing.T) {
	r := &countersRun{o: CountersOptions{Maximum: 2}, held: make([]atomic.Int64, 2), check: newCheck(counterKinds)}
	r.held[0].Store(3)
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r.closedByServer(map[int]uint32{0: 1}, at(10))
	if got := r.held[0].Load(); got != 2 || r.closedConns != 1 || r.closedUnits != 1 {
		t.Fatalf("after the close: held %d, %d conns, %d units", got, r.closedConns, r.closedUnits)
	}
	r.closed[0].at = at(50)
	r.overs = []overCount{
		{name: 0, held: 3, at: at(20), subject: "excused"},               // within the maximum without the closed unit
		{name: 0, held: 4, at: at(20), subject: "too many"},              // still above it
		{name: 0, held: 3, at: at(5), subject: "before the last answer"}, // the server still held it then
		{name: 0, held: 3, at: at(60), subject: "after the close"},       // no longer counted then: a real excess
		{name: 1, held: 3, at: at(20), subject: "another name"},
	}
	r.settleOvers()
	if r.excused != 1 {
		t.Errorf("%d excused, want 1", r.excused)
	}
	if got := r.check.Problems[OverMaximum]; got != 4 {
		t.Errorf("%d over-maximum problems, want 4: %v", got, r.check.Listed)
	}
	for _, p := range r.check.Listed {
		if p.Subject == "excused" {
			t.Errorf("excused count listed: %v", p)
		}
	}
}
