package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// Traffic is the counter port's and the /counters/ API's totals, read
// from the series /metrics serves (one source for both), for /stats and
// the status page.
type Traffic struct {
	// Connections is the counter port's open connections
	// (vkcounter_counterport_connections).
	Connections int64 `json:"connections"`
	// Requests is the counter port's requests by opcode, all statuses
	// (vkcounter_counterport_requests_total); only opcodes asked for.
	Requests map[string]int64 `json:"requests"`
	// Failed is those answered with a status other than ok, by status
	// (not_found, no_memory, …).
	Failed map[string]int64 `json:"failed"`
	// HTTP is the /counters/ API's requests by route
	// (vkcounter_counters_http_requests_total); HTTPFailed those answered
	// 4xx or 5xx, by status code.
	HTTP       map[string]int64 `json:"http_requests"`
	HTTPFailed map[string]int64 `json:"http_failed"`
}

// Traffic returns the counter port's and the /counters/ API's totals.
func (m *Metrics) Traffic() Traffic {
	t := Traffic{Requests: map[string]int64{}, Failed: map[string]int64{}, HTTP: map[string]int64{}, HTTPFailed: map[string]int64{}}
	var g dto.Metric
	if m.counterConns.Write(&g) == nil {
		t.Connections = int64(g.GetGauge().GetValue())
	}
	each(m.counterRequests, func(labels map[string]string, v int64) {
		t.Requests[labels["opcode"]] += v
		if labels["status"] != wire.StatusOK.Label() {
			t.Failed[labels["status"]] += v
		}
	})
	each(m.httpRequests, func(labels map[string]string, v int64) {
		t.HTTP[labels["route"]] += v
		if code := labels["code"]; code >= "400" {
			t.HTTPFailed[code] += v
		}
	})
	for _, mp := range []map[string]int64{t.Requests, t.Failed, t.HTTP, t.HTTPFailed} {
		for k, v := range mp {
			if v == 0 {
				delete(mp, k) // the series created at 0 for the first scrape
			}
		}
	}
	return t
}

// each calls f with the labels and value of every series of c.
func each(c *prometheus.CounterVec, f func(labels map[string]string, v int64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for s := range ch {
		var d dto.Metric
		if s.Write(&d) != nil {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		f(labels, int64(d.GetCounter().GetValue()))
	}
}
