package freq_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// BenchmarkCount measures one Count (one script call on Redis's clock) per
// operation: "hot" counts one text over and over, "texts" cycles through
// benchTexts texts; the parallel variants run from GOMAXPROCS goroutines.
//
// The texts are a fixed set so that the key count stays bounded: miniredis
// with ClockTTL (as redistest and the embedded default run it) walks and
// sorts every key on each command, so its cost per call grows with the
// number of keys.
func BenchmarkCount(b *testing.B) {
	for _, kind := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run(string(kind), func(b *testing.B) {
			for _, distinct := range []bool{false, true} {
				name := "hot"
				if distinct {
					name = "texts"
				}
				b.Run(name, func(b *testing.B) { benchmarkCount(b, kind, distinct, false) })
				b.Run(name+"-parallel", func(b *testing.B) { benchmarkCount(b, kind, distinct, true) })
			}
		})
	}
}

// benchTexts is the number of texts the "texts" benchmarks cycle through.
const benchTexts = 1000

func benchmarkCount(b *testing.B, kind redistest.Kind, distinct, parallel bool) {
	tg := redistest.Open(b, kind)
	// A short window: the keys left on a shared server expire in two minutes.
	s := mustNew(b, tg.Client, freq.Options{Prefix: redistest.Prefix(b), Window: time.Minute})
	ctx := context.Background()
	if err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	identity := func() string {
		if distinct {
			return "text " + strconv.FormatInt(seq.Add(1)%benchTexts, 10)
		}
		return "hot text"
	}
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			if _, _, err := s.Count(ctx, identity(), ""); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.Count(ctx, identity(), ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
