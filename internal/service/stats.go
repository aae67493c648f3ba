package service

import (
	"time"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/version"
)

// statsDoc reads the process's figures, /stats (admin.Stats): it makes
// no Redis call, so it answers at once while Redis is slow or down. Each
// figure read from Redis carries its age.
func (m *Main) statsDoc() admin.Stats {
	v := version.Get()
	doc := admin.Stats{
		Service: admin.ServiceSection{Version: v.Version, Revision: v.Revision, UptimeSeconds: age.Since(m.started),
			Mode: m.cfg.VKMode, DryRun: m.dryRun},
		WindowSeconds: int64(m.cfg.Window / time.Second),
		Redis:         m.redisKind(),
		Webhook:       m.webhookReport(),
		Bot:           m.bot.bot.Stats(),
		LastDrops:     m.bot.bot.LastDrops(),
		Outbox:        m.bot.outbox.Report(m.bot.groups...),
		Counters:      admin.CountersSection{Store: m.cfg.CountersStore, ActivityReport: m.bot.bot.ActivityReport()},
		CounterPort:   m.metrics.Traffic(),
		TopTexts:      admin.TopTexts(m.bot.top, time.Now()),
		VK:            admin.VKSection{ConsecutiveFailures: m.bot.bot.ConsecutiveVKFailures(), Tokens: m.bot.bot.Tokens()},
	}
	if r := m.counters.guard.Last(); r != nil {
		doc.RedisMemory = &admin.MemorySection{Node: r.Node, UsedBytes: r.Used, MaxBytes: r.Max, LimitBytes: r.Limit,
			Full: r.Full(), Refused: m.counters.guard.Refusals(), Age: age.Since(r.At)}
	}
	if err := m.counters.guard.Unknown(); err != nil {
		if doc.RedisMemory == nil {
			doc.RedisMemory = &admin.MemorySection{Refused: m.counters.guard.Refusals()}
		}
		doc.RedisMemory.Unknown = err.Error()
	}
	if m.longpoll.pollers != nil {
		doc.Longpoll = m.longpoll.pollers.Stats()
	}
	if m.port.resources != nil {
		doc.Resources = &admin.ResourcesSection{YoungRefusals: m.port.resources.YoungRefusals()}
		if until, ok := m.port.resources.RefusedUntil(); ok {
			doc.Resources.RefusedUntil, doc.Resources.Why = until.UTC().Format(time.RFC3339Nano), resource.YoungReason
		}
	}
	return doc
}

// webhookReport reads the webhook's refusals.
func (m *Main) webhookReport() admin.WebhookSection {
	w := admin.WebhookSection{Rejected: map[string]int64{}}
	for _, r := range callback.Reasons() {
		w.Rejected[r.String()] = m.http.webhook.Rejected(r)
	}
	return w
}
