package participant

import (
	"math/rand/v2"
	"testing"
)

// TestBySecond checks the Fenwick tree against a plain count, with
// seconds added in order, out of order, and emptied.
func TestBySecond(t *testing.T) {
	var c bySecond
	plain := map[int64]int{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		sec := int64(1000 + i/10)
		if r.IntN(20) == 0 {
			sec -= int64(r.IntN(500)) // a clock gone back
		}
		d := 1
		if plain[sec] > 0 && r.IntN(3) == 0 {
			d = -1
		}
		c.add(sec, d)
		plain[sec] += d
		if i%97 == 0 {
			for _, at := range []int64{0, 900, sec - 50, sec, sec + 1, 5000} {
				want := 0
				for s, n := range plain {
					if s >= at {
						want += n
					}
				}
				if got := c.since(at); got != want {
					t.Fatalf("step %d: since(%d) = %d, want %d", i, at, got, want)
				}
			}
		}
	}
	// Emptied from the oldest on: the empty seconds are dropped.
	for sec, n := range plain {
		c.add(sec, -n)
	}
	if c.total != 0 || c.since(0) != 0 || len(c.secs) > 200 {
		t.Fatalf("emptied: total %d, since(0) %d, %d seconds kept", c.total, c.since(0), len(c.secs))
	}
}
