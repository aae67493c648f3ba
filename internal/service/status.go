package service

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/internal/config"
)

// The admin surface (package admin: the status page, /stats, /texts,
// /readyz) reads the service through adminSource, which fills its
// Snapshot; sampleHistory feeds the page's charts.

// adminSource is the service as package admin reads it.
type adminSource struct{ m *Main }

// Stats reads the process's figures (statsDoc), with no Redis call.
func (s adminSource) Stats() admin.Stats { return s.m.statsDoc() }

// Snapshot reads what the status page shows: statsDoc and the service's
// facts (where Redis is, the communities, the settings in force).
func (s adminSource) Snapshot() admin.Snapshot {
	m := s.m
	snap := admin.Snapshot{
		Stats:       m.statsDoc(),
		RedisWhere:  m.cfg.Redis().Where(),
		CounterAddr: m.CounterAddr(),
		Window:      config.Duration(m.cfg.Window),
		Webhook:     m.cfg.VKMode == config.ModeCallback,
		Settings:    m.settingRows(),
	}
	if m.redis.embedded != nil {
		snap.RedisWhere = "embedded Redis (in this process)"
	}
	if communities, err := m.cfg.Communities(); err == nil {
		for _, c := range communities {
			snap.Communities = append(snap.Communities, admin.Community{GroupID: c.GroupID, Tokens: len(c.Tokens())})
		}
	}
	return snap
}

// sampleHistory starts the status page's history sampler, stopped by
// Close.
func (m *Main) sampleHistory() {
	m.history.Observe(time.Now(), m.bot.bot.Stats(), m.metrics.Traffic())
	m.workers.start(func(ctx context.Context) {
		t := time.NewTicker(admin.HistoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				m.history.Observe(now, m.bot.bot.Stats(), m.metrics.Traffic())
			}
		}
	})
}

// settingRows are every setting's value as the process runs with it,
// secrets as set or not set.
func (m *Main) settingRows() []admin.Setting {
	var rows []admin.Setting
	for _, v := range config.Values(m.cfg) {
		val := v.Text
		switch {
		case v.Secret != config.Public && val == "":
			val = "not set"
		case v.Secret != config.Public:
			val = "set"
		default:
			val = m.inForce(v.Env, v.Flag)
		}
		rows = append(rows, admin.Setting{Name: v.Env, Value: val})
	}
	return rows
}

// settingUnits are the units of the numeric settings that have one
// (durations carry theirs).
var settingUnits = map[string]string{
	"MAX_BODY_BYTES":                "bytes",
	"RESOURCE_MAX_MEMORY":           "bytes",
	"COUNTERS_MEMORY_MAX_BYTES":     "bytes",
	"COUNTER_STATS_INTERVAL":        "s",
	"COUNTERS_REDIS_HEADROOM":       "% of maxmemory",
	"VK_RATE":                       "calls/s per token",
	"VK_BATCH":                      "replies per call",
	"OUTBOX_MAX_LEN":                "replies per community",
	"COUNTER_MAX_CONNECTIONS":       "connections",
	"HTTP_MAX_CONNECTIONS":          "connections per server",
	"COUNTER_BUCKETS":               "buckets",
	"COUNTERS_PARTICIPANT_MAX_KEYS": "keys per name",
	"COUNTERS_MEMORY_MAX_NAMES":     "names per kind",
	"COUNTERS_FILE_LEVELS":          "files per counter",
	"TOP_TEXTS":                     "texts",
}

// inForce writes the value v of the setting env as the service runs with
// it: a duration as written in the settings (24h), a number with its
// unit, an empty value as not set, and VK_GROUP_ID as the community it
// makes the service serve.
func (m *Main) inForce(env string, v flag.Value) string {
	if g, ok := v.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return config.Duration(d)
		}
	}
	val := v.String()
	switch {
	case env == "VK_GROUP_ID" && m.cfg.VKGroups != "":
		return "not set (VK_GROUPS names the communities)"
	case env == "VK_GROUP_ID" && m.cfg.Demo():
		return fmt.Sprintf("not set: demo community %d served, in dry-run", config.DemoGroupID)
	case val == "":
		return "not set"
	}
	unit, ok := settingUnits[env]
	if !ok {
		return val
	}
	if n, err := strconv.ParseInt(val, 10, 64); err == nil && unit == "bytes" {
		return val + " bytes (" + admin.Bytes(n) + ")"
	}
	if env == "COUNTER_MAX_CONNECTIONS" && val == "0" || env == "HTTP_MAX_CONNECTIONS" && val == "0" {
		return "0 (unlimited)"
	}
	return val + " " + unit
}
