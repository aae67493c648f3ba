package participant_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/participant"
)

// staleKeys is the number of keys of the name whose keys all expired in
// BenchmarkActiveStale.
const staleKeys = 1_000_000

// BenchmarkActiveStale measures the memory store with one name holding
// staleKeys expired keys (no Visit of it came since): Active of it
// ("stale"), and as the reference in the same run Active of a name
// holding as many keys all active ("live"); then Visits of another name
// while four goroutines poll Active of the stale name ("visit-while-polled"),
// against the same Visits without them ("visit-quiet").
func BenchmarkActiveStale(b *testing.B) {
	const t0 = 1_800_000_000
	var now = int64(t0)
	m := participant.NewMemory(func() time.Time { return time.Unix(now, 0) }, participant.MemoryLimits{MaxBytes: 4 << 30})
	ctx := context.Background()
	keys := make([]string, participant.MaxBatch)
	fill := func(name string, timeout time.Duration) {
		for i := 0; i < staleKeys; i += len(keys) {
			for j := range keys {
				keys[j] = strconv.Itoa(i + j)
			}
			if _, _, err := m.VisitMany(ctx, name, keys, timeout); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill("stale", time.Second)
	fill("live", time.Hour)
	now = t0 + 60 // stale's keys expired 59 s ago, live's are active
	active := func(b *testing.B, name string, want int) {
		for b.Loop() {
			if n, err := m.Active(ctx, name, time.Second*time.Duration(map[string]int{"stale": 1, "live": 3600}[name])); err != nil || n != want {
				b.Fatalf("Active(%s) = %d, %v; want %d", name, n, err, want)
			}
		}
	}
	b.Run("stale", func(b *testing.B) { active(b, "stale", 0) })
	b.Run("live", func(b *testing.B) { active(b, "live", staleKeys) })
	visits := func(b *testing.B, pollers int) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range pollers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					m.Active(ctx, "stale", time.Second)
				}
			})
		}
		i := 0
		for b.Loop() {
			i++
			if _, _, err := participant.Visit(ctx, m, "other", strconv.Itoa(i%1000), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
	}
	b.Run("visit-while-polled", func(b *testing.B) { visits(b, 4) })
	b.Run("visit-quiet", func(b *testing.B) { visits(b, 0) })
}
