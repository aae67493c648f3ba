package bot

import (
	"strconv"
	"testing"
)

// TestDropLogKeepsTheLastFew: past its size the log keeps the newest.
func TestDropLogKeepsTheLastFew(t *testing.T) {
	var b Bot
	for i := range 12 {
		b.dropped(Reply{PeerID: i}, nil)
	}
	got := b.LastDrops()
	if len(got) != lastDrops || b.stats.dropped.Load() != 12 {
		t.Fatalf("%d kept, %d counted", len(got), b.stats.dropped.Load())
	}
	for i, d := range got {
		if d.PeerID != 11-i {
			t.Errorf("drop %d is peer %s, want %d", i, strconv.Itoa(d.PeerID), 11-i)
		}
	}
}
