package loadtest

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 900, 320
	marginL        = 70
	marginR        = 20
	marginT        = 20
	marginB        = 45
	timeBins       = 60 // time bins of the p99 line
	histBins       = 60 // latency bins of the histogram
)

// palette colours the series, in order.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>vkcounter loadtest {{.R.Tool}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:960px}
table{border-collapse:collapse;margin:1em 0}td,th{padding:.2em .8em;text-align:right;border-bottom:1px solid #ddd}
th:first-child,td:first-child{text-align:left}.ok{color:#2a7d2a}.bad{color:#c0392b}
svg{background:#fafafa;border:1px solid #ddd}code{font-size:.9em}
</style></head><body>
<h1>vkcounter loadtest {{.R.Tool}}</h1>
<p>{{.R.Scenario}}<br>target <code>{{.R.Target}}</code>, started {{.Started}}</p>
<p>stopped: {{.R.Stopped}} after {{.Elapsed}} — {{.R.Requests}} requests, {{.Rate}} requests/s{{if .R.Events}}, {{.R.Events}} events{{end}}; errors {{.R.Errors}}{{range $k, $v := .R.ErrorKinds}} [{{$k}}: {{$v}}]{{end}}</p>
{{if .Faults}}<p>faults injected:</p><ul>{{range .Faults}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
<table><tr><th>latency</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range .Latency}}<tr><td>{{.Name}}</td><td>{{.Count}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.Max}}</td></tr>
{{end}}</table>
<p>answers checked: {{.R.Check.Checked}}{{range .Kinds}}, {{.Name}}: {{.N}}{{end}}</p>
{{if .R.OK}}<p class="ok">every answer right</p>{{else}}<p class="bad">{{.R.Check.Wrong}} wrong answers</p>
<ul>{{range .R.Check.Listed}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
<h2>Latency over time</h2>
<p>Each dot is one request (evenly thinned beyond {{.MaxSamples}} per series); the line is the p99 of its time slice.</p>
{{.OverTime}}
<h2>Latency histogram</h2>
{{.Histogram}}
</body></html>
`))

// WriteHTML writes the report as one self-contained HTML page, its charts
// inline SVG: latency over time and a latency histogram per series.
func (r *Report) WriteHTML(w io.Writer) error {
	type latencyRow struct {
		Name               string
		Count              int64
		P50, P90, P99, Max string
	}
	type kind struct {
		Name string
		N    int64
	}
	data := struct {
		R                   *Report
		Started, Elapsed    string
		Rate                string
		Latency             []latencyRow
		Kinds               []kind
		Faults              []string
		MaxSamples          int
		OverTime, Histogram template.HTML
	}{
		R: r, Started: r.Started.Format(time.RFC3339), Elapsed: fmtDuration(r.Elapsed),
		Rate: fmt.Sprintf("%.0f", r.RequestsPerSecond()), MaxSamples: maxSamples,
		OverTime: template.HTML(overTimeSVG(r.charts, r.Faults)), Histogram: template.HTML(histogramSVG(r.charts)),
	}
	for _, f := range r.Faults {
		data.Faults = append(data.Faults, f.Fault+": "+f.span())
	}
	for _, l := range r.Latency {
		data.Latency = append(data.Latency, latencyRow{l.Name, l.Count, fmtDuration(l.P50), fmtDuration(l.P90), fmtDuration(l.P99), fmtDuration(l.Max)})
	}
	for _, k := range r.Check.kinds {
		data.Kinds = append(data.Kinds, kind{string(k), r.Check.Problems[k]})
	}
	return pageTemplate.Execute(w, data)
}

// logScale maps durations to a coordinate range on a log axis spanning
// whole decades around [lo, hi].
type logScale struct {
	lo, hi   float64 // log10 of the bounds, in nanoseconds
	from, to float64
}

func newLogScale(lo, hi time.Duration, from, to float64) logScale {
	l := math.Floor(math.Log10(math.Max(float64(lo), 1000)))
	h := math.Ceil(math.Log10(math.Max(float64(hi), 1)))
	if h <= l {
		h = l + 1
	}
	return logScale{lo: l, hi: h, from: from, to: to}
}

func (s logScale) at(d time.Duration) float64 {
	v := math.Log10(math.Max(float64(d), math.Pow(10, s.lo)))
	return s.from + (v-s.lo)/(s.hi-s.lo)*(s.to-s.from)
}

// ticks returns 1, 2 and 5 times each power of ten in range.
func (s logScale) ticks() []time.Duration {
	var out []time.Duration
	for e := s.lo; e <= s.hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); math.Log10(v) <= s.hi+1e-9 {
				out = append(out, time.Duration(v))
			}
		}
	}
	return out
}

// latencyRange returns the smallest and largest latency of the charts.
func latencyRange(charts []chartSeries) (lo, hi time.Duration) {
	lo = time.Duration(math.MaxInt64)
	for _, c := range charts {
		if c.Hist.Count() == 0 {
			continue
		}
		lo = min(lo, c.Hist.Quantile(0))
		hi = max(hi, c.Hist.Max())
	}
	if hi == 0 {
		return time.Millisecond, time.Second
	}
	return lo, hi
}

func svgOpen(b *strings.Builder, label string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-size="11">`,
		chartW, chartH, chartW, chartH, html.EscapeString(label))
}

// yAxis draws the latency axis with its grid.
func yAxis(b *strings.Builder, y logScale) {
	for _, t := range y.ticks() {
		py := y.at(t)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%d" y="%.1f" text-anchor="end" dy="4">%s</text>`,
			marginL, chartW-marginR, py, py, marginL-6, py, fmtDuration(t))
	}
}

func legend(b *strings.Builder, charts []chartSeries) {
	for i, c := range charts {
		x := marginL + 10 + i*160
		fmt.Fprintf(b, `<rect x="%d" y="6" width="10" height="10" fill="%s"/><text x="%d" y="15">%s</text>`,
			x, palette[i%len(palette)], x+14, html.EscapeString(c.Name))
	}
}

// overTimeSVG draws every kept sample as a dot at (start time, latency),
// and the p99 of each time slice as a line.
func overTimeSVG(charts []chartSeries, faults []FaultRecord) string {
	var b strings.Builder
	svgOpen(&b, "latency over time")
	var end time.Duration
	for _, c := range charts {
		if n := len(c.Samples); n > 0 {
			end = max(end, c.Samples[n-1].At)
		}
	}
	for _, f := range faults {
		end = max(end, f.Ended)
	}
	end = max(end, time.Millisecond)
	lo, hi := latencyRange(charts)
	y := newLogScale(lo, hi, chartH-marginB, marginT)
	x := func(at time.Duration) float64 {
		return marginL + float64(at)/float64(end)*(chartW-marginL-marginR)
	}
	yAxis(&b, y)
	step := niceStep(end.Seconds() / 6)
	for t := 0.0; t <= end.Seconds()+1e-9; t += step {
		px := x(time.Duration(t * 1e9))
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e4e4e4"/><text x="%.1f" y="%d" text-anchor="middle">%gs</text>`,
			px, px, marginT, chartH-marginB, px, chartH-marginB+16, math.Round(t*1000)/1000)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">time since start</text>`, (chartW+marginL)/2, chartH-6)
	faultBands(&b, faults, x)
	for i, c := range charts {
		color := palette[i%len(palette)]
		fmt.Fprintf(&b, `<g fill="%s" fill-opacity="0.35">`, color)
		for _, s := range c.Samples {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.6"/>`, x(s.At), y.at(s.Latency))
		}
		b.WriteString(`</g>`)
		var points []string
		for bin, p99 := range sliceP99(c.Samples, end) {
			if p99 >= 0 {
				mid := (time.Duration(bin)*end + end/2) / timeBins
				points = append(points, fmt.Sprintf("%.1f,%.1f", x(mid), y.at(p99)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, color, strings.Join(points, " "))
	}
	legend(&b, charts)
	b.WriteString(`</svg>`)
	return b.String()
}

// faultBands shades the time each fault was in force, labelled with the
// fault, one row of labels per fault.
func faultBands(b *strings.Builder, faults []FaultRecord, x func(time.Duration) float64) {
	for i, f := range faults {
		if f.Ended == 0 {
			continue
		}
		x0, x1 := x(f.Began), x(f.Ended)
		fmt.Fprintf(b, `<rect class="fault" x="%.1f" y="%d" width="%.1f" height="%d" fill="#d62728" fill-opacity="0.08"/>`,
			x0, marginT, max(x1-x0, 1), chartH-marginB-marginT)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#a02020" font-size="10">%s</text>`,
			x0+2, marginT+10+11*(i%8), html.EscapeString(f.Fault))
	}
}

// sliceP99 returns the p99 of the samples in each of timeBins slices of
// [0, end], or −1 for an empty slice.
func sliceP99(samples []sample, end time.Duration) []time.Duration {
	bins := make([][]time.Duration, timeBins)
	for _, s := range samples {
		i := min(int(int64(s.At)*timeBins/int64(end)), timeBins-1)
		bins[max(i, 0)] = append(bins[max(i, 0)], s.Latency)
	}
	out := make([]time.Duration, timeBins)
	for i, v := range bins {
		if len(v) == 0 {
			out[i] = -1
			continue
		}
		slices.Sort(v)
		out[i] = v[min(int(math.Ceil(0.99*float64(len(v))))-1, len(v)-1)]
	}
	return out
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// histogramSVG draws, per series, the share of requests in each of
// histBins logarithmic latency bins, as a step line.
func histogramSVG(charts []chartSeries) string {
	var b strings.Builder
	svgOpen(&b, "latency histogram")
	lo, hi := latencyRange(charts)
	x := newLogScale(lo, hi, marginL, chartW-marginR)
	shares := make([][]float64, len(charts))
	var top float64
	for i, c := range charts {
		shares[i] = make([]float64, histBins)
		if c.Hist.Count() == 0 {
			continue
		}
		for bucket, n := range c.Hist.counts {
			if n == 0 {
				continue
			}
			pos := (x.at(time.Duration(bucketMid(bucket))) - marginL) / (chartW - marginL - marginR)
			bin := min(max(int(pos*histBins), 0), histBins-1)
			shares[i][bin] += float64(n) / float64(c.Hist.Count())
		}
		top = max(top, slices.Max(shares[i]))
	}
	if top == 0 {
		top = 1
	}
	ypx := func(share float64) float64 { return chartH - marginB - share/top*(chartH-marginB-marginT-14) }
	for _, t := range x.ticks() {
		px := x.at(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e4e4e4"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			px, px, marginT, chartH-marginB, px, chartH-marginB+16, fmtDuration(t))
	}
	for _, f := range []float64{0.25, 0.5, 0.75, 1} {
		py := ypx(f * top)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dy="4">%.1f%%</text>`, marginL-6, py, 100*f*top)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">latency (share of requests per bin)</text>`, (chartW+marginL)/2, chartH-6)
	binW := float64(chartW-marginL-marginR) / histBins
	for i := range charts {
		var points []string
		for bin, s := range shares[i] {
			x0 := marginL + float64(bin)*binW
			points = append(points, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x0, ypx(s), x0+binW, ypx(s)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, palette[i%len(palette)], strings.Join(points, " "))
	}
	legend(&b, charts)
	b.WriteString(`</svg>`)
	return b.String()
}
