package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// TestStatusPageUnitsAndSettings: on the README's demo's page the charts
// have a y-axis with its scale, the window its unit, each messages figure
// one meaning, and the settings are shown as in force: the demo
// community, an empty setting as not set, durations and sizes with units.
func TestStatusPageUnitsAndSettings(t *testing.T) {
	a := startApp(t, nil, servicetest.DemoEnv)
	for i := range 4 {
		a.MustOK(t, servicetest.DemoEvent(fmt.Sprintf("e%d", i), 11+i, "hello"))
	}
	a.MustOK(t, servicetest.DemoEvent("e0", 11, "hello")) // a re-delivery
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
		"Replies logged per minute (dry-run: not sent)", // the demo is in dry-run
		"dry-run (replies are logged, not sent)",
		"<td>1</td><td>none</td><td><b>dry-run</b>",
		"embedded Redis (in this process)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	names := map[string]bool{}
	for _, s := range config.Settings() {
		names[s.Env] = true
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
