package loadtest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSettleOversExcusesClosedHoldings: a count above the maximum is a
// problem unless the units of a connection the server closed, which may
// have been released from when its last answered request was sent until
// they stopped counting (at the close, or when a release the close cut off
// was sent), bring it within the maximum.
func TestSettleOversExcusesClosedHoldings(t *testing.T) {
	r := &countersRun{o: CountersOptions{Maximum: 2}, held: make([]atomic.Int64, 3), check: newCheck(counterKinds)}
	r.held[0].Store(3)
	r.held[1].Store(2) // the release in flight stopped counting its unit when sent
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r.closedByServer(map[int]uint32{0: 1}, closedHolding{name: 1, units: 1, at: at(40)}, at(10))
	if h0, h1 := r.held[0].Load(), r.held[1].Load(); h0 != 2 || h1 != 2 || r.closedConns != 1 || r.closedUnits != 2 {
		t.Fatalf("after the close: held %d and %d, %d conns, %d units", h0, h1, r.closedConns, r.closedUnits)
	}
	for i := range r.closed {
		if r.closed[i].name == 0 {
			r.closed[i].at = at(50)
		}
	}
	r.overs = []overCount{
		{name: 0, held: 3, at: at(20), subject: "excused"},               // within the maximum without the closed unit
		{name: 0, held: 4, at: at(20), subject: "too many"},              // still above it
		{name: 0, held: 3, at: at(5), subject: "before the last answer"}, // the server still held it then
		{name: 0, held: 3, at: at(60), subject: "after the close"},       // no longer counted then: a real excess
		{name: 1, held: 3, at: at(20), subject: "excused in flight"},     // the close may have freed the unit being released
		{name: 1, held: 3, at: at(45), subject: "after the release"},     // no longer counted then
		{name: 2, held: 3, at: at(20), subject: "another name"},
	}
	r.settleOvers()
	if r.excused != 2 {
		t.Errorf("%d excused, want 2", r.excused)
	}
	if got := r.check.Problems[OverMaximum]; got != 5 {
		t.Errorf("%d over-maximum problems, want 5: %v", got, r.check.Listed)
	}
	for _, p := range r.check.Listed {
		if strings.HasPrefix(p.Subject, "excused") {
			t.Errorf("excused count listed: %v", p)
		}
	}
}
