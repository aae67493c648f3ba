package loadtest_test

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/loadtest"
)

func TestHistogramQuantiles(t *testing.T) {
	var h loadtest.Histogram
	if h.Quantile(0.5) != 0 || h.Count() != 0 {
		t.Fatal("an empty histogram must answer 0")
	}
	// 1 µs … 100 ms, evenly: the q-quantile is about q × 100 ms.
	const n = 100000
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		want := q * n * float64(time.Microsecond)
		if got := float64(h.Quantile(q)); math.Abs(got-want)/want > 0.004 {
			t.Errorf("q%g = %v, want %v within 0.4%%", q, time.Duration(got), time.Duration(want))
		}
	}
	if h.Max() != n*time.Microsecond || h.Quantile(1) != h.Max() {
		t.Errorf("max %v, q1 %v; want exactly %v", h.Max(), h.Quantile(1), n*time.Microsecond)
	}

	var small, big, all loadtest.Histogram
	for _, d := range []time.Duration{-5, 0, 1, 255, 256, 257} {
		small.Record(d)
	}
	if small.Quantile(0) != 0 || small.Max() != 257 || small.Count() != 6 {
		t.Errorf("small values: q0 %v max %v count %d", small.Quantile(0), small.Max(), small.Count())
	}
	big.Record(time.Hour)
	all.Merge(&small)
	all.Merge(&big)
	if all.Count() != 7 || all.Max() != time.Hour || all.Quantile(0.5) != 255 {
		t.Errorf("merged: count %d max %v median %v", all.Count(), all.Max(), all.Quantile(0.5))
	}
	if s := all.Summary("x"); s.Name != "x" || s.Count != 7 || s.Max != time.Hour || s.P99 > time.Hour {
		t.Errorf("summary %+v", s)
	}
}

func TestLatencyJSONInMilliseconds(t *testing.T) {
	b, err := json.Marshal(loadtest.Latency{Name: "webhook", Count: 3, P50: 1500 * time.Microsecond, P90: 2 * time.Millisecond, P99: 12345 * time.Microsecond, Max: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"webhook","count":3,"p50_ms":1.5,"p90_ms":2,"p99_ms":12.345,"max_ms":1000}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestCheckHost(t *testing.T) {
	for host, ok := range map[string]bool{
		"": true, "localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.9.8.7": true, "::1": true, "::ffff:127.0.0.1": true,
		"10.0.0.1": false, "192.168.1.1": false, "8.8.8.8": false, "::": false, "0.0.0.0": false, "example.com": false, "localhost.example.com": false,
	} {
		err := loadtest.CheckHost(host, false)
		if (err == nil) != ok {
			t.Errorf("CheckHost(%q) = %v, want allowed %v", host, err, ok)
		}
		if err := loadtest.CheckHost(host, true); err != nil {
			t.Errorf("CheckHost(%q, allowRemote) = %v", host, err)
		}
	}
}

// TestReportOutputs runs a short load against a fake bot and checks the
// three renderings: the table names every figure, the JSON carries them,
// and the HTML page is self-contained with both charts.
func TestReportOutputs(t *testing.T) {
	t.Parallel() // mostly waits (the reply timeout, for a missing reply): alongside the other waiting tests
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		if k == 2 {
			r = nil
		}
		return 200, r
	}
	rep := run(t, options(u, vk))

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"30 events", "requests/s", "webhook→reply", "p99", "missing: 1", "result: 1 wrong answer\n", b.eventID(2)} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Requests int64   `json:"requests"`
		Rate     float64 `json:"requests_per_s"`
		OK       bool    `json:"ok"`
		Latency  []struct {
			Name string  `json:"name"`
			P99  float64 `json:"p99_ms"`
		} `json:"latency"`
		Check struct {
			Problems map[string]int64 `json:"problems"`
			Listed   []struct {
				Kind, Subject string
			} `json:"listed"`
		} `json:"check"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Requests != 30 || got.Rate <= 0 || got.OK || len(got.Latency) != 2 || got.Latency[0].P99 <= 0 ||
		got.Check.Problems["missing"] != 1 || got.Check.Problems["duplicate"] != 0 || len(got.Check.Listed) != 1 {
		t.Errorf("JSON %s", js.String())
	}

	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d charts, want 2", n)
	}
	if strings.Count(html, "<circle") < 30 || !strings.Contains(html, "<polyline") {
		t.Error("the latency-over-time chart has no points or no p99 line")
	}
	// Self-contained: no scripts, links, images or URLs but the SVG namespace
	// and the target printed as text.
	external := regexp.MustCompile(`(?i)<script|<link|<img|src=|href=|url\(`)
	if m := external.FindString(html); m != "" {
		t.Errorf("the page loads an external asset: %q", m)
	}
	if !strings.Contains(html, b.eventID(2)) || !strings.Contains(html, "missing: 1") {
		t.Error("the page does not list the problem")
	}
}
