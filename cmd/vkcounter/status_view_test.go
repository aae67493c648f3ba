package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestAxisScale(t *testing.T) {
	for max, want := range map[int64]int64{0: 2, 1: 2, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 40: 50, 51: 100, 100: 100, 101: 200, 4999: 5000} {
		if got := axisScale(max); got != want {
			t.Errorf("axisScale(%d) = %d, want %d", max, got, want)
		}
	}
}

// TestStatusPageUnitsAndSettings: on the README's demo's page the charts
// have a y-axis with its scale, the window its unit, each messages figure
// one meaning, and the settings are shown as in force: the demo
// community, an empty setting as not set, durations and sizes with units.
func TestStatusPageUnitsAndSettings(t *testing.T) {
	a := startApp(t, nil, demoEnv)
	for i := range 4 {
		a.mustOK(t, demoEvent(fmt.Sprintf("e%d", i), 11+i, "hello"))
	}
	a.mustOK(t, demoEvent("e0", 11, "hello")) // a re-delivery
	_, page := a.getPage(t)
	for _, want := range []string{
		`<div class="yaxis" aria-hidden="true"><span>5</span><span>2.5</span><span>0</span></div>`, // 4 in the minute: 0 to 5
		`counted (each message once)</td><td class="n">4</td>`,
		`4 since start`,
		`deliveries (counted + re-deliveries)</td><td class="n" data-stat="bot.received">5</td>`,
		`24h (<span data-stat="window_seconds">86400</span> s)`,
		settingShown("VK_GROUP_ID", "not set: demo community 1 served, in dry-run"),
		settingShown("REDIS_CLUSTER", "not set"),
		settingShown("COUNTERS_DIR", "not set"),
		settingShown("WINDOW", "24h"),
		settingShown("SHUTDOWN_TIMEOUT", "10s"),
		settingShown("MAX_BODY_BYTES", "1048576 bytes (1.0 MiB)"),
		settingShown("COUNTER_STATS_INTERVAL", "86400 s"),
		settingShown("COUNTERS_REDIS_HEADROOM", "20 % of maxmemory"),
		settingShown("VK_RATE", "1000 calls/s per token"),
		settingShown("TOP_TEXTS", "0 texts"),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}

	var c Config
	names := map[string]bool{}
	for _, s := range settings(&c) {
		names[s.env] = true
	}
	for env := range settingUnits {
		if !names[env] {
			t.Errorf("settingUnits names %s, which is not a setting", env)
		}
	}
}

// settingShown is a row of the page's settings.
func settingShown(name, value string) string {
	return "<tr><td><code>" + name + "</code></td><td><code>" + value + "</code></td></tr>"
}

// TestStatusPageStaysStatic: the page keeps its Content-Security-Policy
// (nothing loaded, no script), runs no script and fits a phone's width.
func TestStatusPageStaysStatic(t *testing.T) {
	a := startApp(t, nil, map[string]string{"TOP_TEXTS": "3"})
	a.mustOK(t, event("m1", 7, 1, "hello"))
	resp, err := http.Get(a.adminURL("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if csp := resp.Header.Get("Content-Security-Policy"); csp != "default-src 'none'; style-src 'unsafe-inline'; img-src data:" {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := string(body)
	for _, s := range []string{"<script", "javascript:", " onload=", " onclick="} {
		if strings.Contains(strings.ToLower(page), s) {
			t.Errorf("the page holds %q", s)
		}
	}
	if !strings.Contains(page, `<meta name="viewport" content="width=device-width, initial-scale=1">`) ||
		!strings.Contains(page, "grid-template-columns:repeat(auto-fit,minmax(320px,1fr))") {
		t.Errorf("the page lost its phone layout (the viewport, or one column below 320 px)")
	}
}
