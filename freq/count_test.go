package freq_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestCountSetsDedupeTTLOnce: count.lua (Store.Count, and a message's
// count on a Redis Cluster) sets the TTL of a period's dedupe hash with
// the period's first message only, not with every message, and the hash
// still expires: INFO commandstats, on a server of the test's own, counts
// the EXPIREs of 50 messages of one text at one second.
func TestCountSetsDedupeTTLOnce(t *testing.T) {
	tg := redistest.OwnServer(t)
	ctx := context.Background()
	s := newStore(t, tg, freq.Options{})
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	before := serverStats(t, tg.Client).calls["expire"]
	const n = 50
	for i := range n {
		r, err := s.CountAt(ctx, "hello", "m"+strconv.Itoa(i), sec(0))
		if err != nil || r.Previous != int64(i) || r.Duplicate {
			t.Fatalf("message %d: %+v, %v; want previous %d, not a duplicate", i, r, err, i)
		}
	}
	// The text's own: its bucket's TTL with the first message, its list's
	// with the second; then the period's dedupe hash, once.
	if got := serverStats(t, tg.Client).calls["expire"] - before; got != 3 {
		t.Errorf("%d EXPIREs for %d messages; want 3: the text's bucket and list, and the dedupe hash once", got, n)
	}
	if r, err := s.CountAt(ctx, "hello", "m7", sec(0)); err != nil || !r.Duplicate || r.Previous != 7 {
		t.Fatalf("message 7 again: %+v, %v; want its first answer, 7, as a duplicate", r, err)
	}
	hashes := 0
	for _, k := range s.Keys("hello")[1:3] {
		switch ttl := tg.Client.TTL(ctx, k).Val(); {
		case ttl > 0:
			hashes++
		case ttl != -2: // -2: the other period's hash, not written
			t.Errorf("dedupe hash %s: TTL %v, want one", k, ttl)
		}
	}
	if hashes != 1 {
		t.Errorf("%d dedupe hashes with a TTL, want 1", hashes)
	}
}
