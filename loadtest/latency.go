package loadtest

import (
	"cmp"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Histogram layout: values below 2*subBuckets nanoseconds have a bucket
// each; above, every power of two is split into subBuckets equal buckets,
// so a bucket's width is at most 1/subBuckets of its lower bound and a
// quantile read from its middle is within 0.4% of the true value.
const (
	subBits    = 7
	subBuckets = 1 << subBits
)

// A Histogram records durations and answers quantiles within 0.4%, in
// constant memory (at most a few thousand counters). The zero value is an
// empty Histogram. It is not safe for concurrent use.
type Histogram struct {
	counts []int64
	n      int64
	max    time.Duration
}

// bucketOf returns the bucket index of v nanoseconds (v >= 0).
func bucketOf(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1 // v>>shift is in [subBuckets, 2*subBuckets)
	return subBuckets*(shift+1) + int(v>>shift) - subBuckets
}

// bucketMid returns the middle value of bucket i, in nanoseconds.
func bucketMid(i int) uint64 {
	if i < 2*subBuckets {
		return uint64(i)
	}
	shift := i/subBuckets - 1
	lower := uint64(i%subBuckets+subBuckets) << shift
	return lower + (uint64(1)<<shift)/2
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := bucketOf(uint64(d))
	if i >= len(h.counts) {
		grown := make([]int64, i+1, max(i+1, 2*len(h.counts)))
		copy(grown, h.counts)
		h.counts = grown
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// clone returns a deep copy of h.
func (h *Histogram) clone() Histogram {
	return Histogram{counts: append([]int64(nil), h.counts...), n: h.n, max: h.max}
}

// Merge adds every duration recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if len(o.counts) > len(h.counts) {
		grown := make([]int64, len(o.counts))
		copy(grown, h.counts)
		h.counts = grown
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() int64 { return h.n }

// Max returns the largest duration recorded, exactly.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the duration below or at which a fraction q (0 to 1) of
// the recorded durations lie, or 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(bucketMid(i)), h.max)
		}
	}
	return h.max
}

// Summary returns the count, quantiles and maximum of h under name.
func (h *Histogram) Summary(name string) Latency {
	return Latency{
		Name:  name,
		Count: h.n,
		P50:   h.Quantile(0.50),
		P90:   h.Quantile(0.90),
		P99:   h.Quantile(0.99),
		Max:   h.max,
	}
}

// A Latency summarises one series of durations.
type Latency struct {
	// Name says what was timed: "webhook", "reply", "acquire", …
	Name  string
	Count int64
	P50   time.Duration
	P90   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// MarshalJSON writes the durations as fractional milliseconds.
func (l Latency) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return json.Marshal(struct {
		Name  string  `json:"name"`
		Count int64   `json:"count"`
		P50   float64 `json:"p50_ms"`
		P90   float64 `json:"p90_ms"`
		P99   float64 `json:"p99_ms"`
		Max   float64 `json:"max_ms"`
	}{l.Name, l.Count, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max)})
}

// A sample is one timed operation: when it started, relative to the start
// of the run, and how long it took.
type sample struct {
	At      time.Duration
	Latency time.Duration
}

// A series collects the durations of one kind of operation from many
// goroutines: a Histogram for the quantiles and a thinned list of samples
// for the chart. It is safe for concurrent use.
type series struct {
	name  string
	start time.Time

	mu      sync.Mutex // guards the fields below
	hist    Histogram
	samples []sample
	stride  int64 // keep one sample in stride
	skipped int64 // samples skipped since the last kept one
}

func newSeries(name string, start time.Time) *series {
	return &series{name: name, start: start, stride: 1}
}

// record adds an operation that began at begin and took d.
func (s *series) record(begin time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hist.Record(d)
	if s.skipped++; s.skipped < s.stride {
		return
	}
	s.skipped = 0
	if len(s.samples) == maxSamples {
		kept := s.samples[:0]
		for i := 0; i < len(s.samples); i += 2 {
			kept = append(kept, s.samples[i])
		}
		s.samples = kept
		s.stride *= 2
	}
	s.samples = append(s.samples, sample{At: begin.Sub(s.start), Latency: d})
}

// snapshot returns a copy of the histogram.
func (s *series) snapshot() Histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hist.clone()
}

// chart returns the series' name, histogram and kept samples for the HTML
// page.
func (s *series) chart() chartSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	return chartSeries{Name: s.name, Hist: s.hist.clone(), Samples: append([]sample(nil), s.samples...)}
}

// A chartSeries is what the HTML page draws of one series.
type chartSeries struct {
	Name    string
	Hist    Histogram
	Samples []sample
}

// mergeCharts merges the charts of several series of the same kind of
// operation (one per connection) into one, its samples in time order and
// thinned evenly to at most maxSamples.
func mergeCharts(name string, parts []chartSeries) chartSeries {
	out := chartSeries{Name: name}
	for _, p := range parts {
		out.Hist.Merge(&p.Hist)
		out.Samples = append(out.Samples, p.Samples...)
	}
	slices.SortFunc(out.Samples, func(a, b sample) int { return cmp.Compare(a.At, b.At) })
	if n := len(out.Samples); n > maxSamples {
		kept := make([]sample, 0, maxSamples)
		for i := range maxSamples {
			kept = append(kept, out.Samples[i*n/maxSamples])
		}
		out.Samples = kept
	}
	return out
}
