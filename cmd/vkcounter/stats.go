package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/version"
	"github.com/vkcounter/vkcounter/metrics"
)

// statsDocument is /stats: each section is its owner's report. The status
// page (/) shows the same document: one reading serves both.
type statsDocument struct {
	Service       serviceSection            `json:"service"`
	WindowSeconds int64                     `json:"window_seconds"`
	Redis         string                    `json:"redis"`
	Webhook       webhookSection            `json:"webhook"`
	Bot           bot.Stats                 `json:"bot"`
	LastDrops     []bot.DroppedReply        `json:"last_drops,omitempty"` // the last few replies dropped, and why
	Outbox        outbox.Report             `json:"outbox"`
	Counters      countersSection           `json:"counters"`
	CounterPort   metrics.Traffic           `json:"counter_port"`
	RedisMemory   *memorySection            `json:"redis_memory,omitempty"`
	VK            vkSection                 `json:"vk"`
	Longpoll      map[string]longpoll.Stats `json:"longpoll,omitempty"`
	Resources     *resourcesSection         `json:"resources,omitempty"` // RESOURCE_STORE=redis
	TopTexts      *topTextsSection          `json:"top_texts,omitempty"` // TOP_TEXTS
}

// webhookSection is what the webhook refused (callback.Handler.Rejected),
// as vkcounter_webhook_rejected_total counts it.
type webhookSection struct {
	// Rejected is the requests refused by reason (callback.Reason's
	// names), every reason present; none in VK_MODE=longpoll, where the
	// webhook is not served.
	Rejected map[string]int64 `json:"rejected"`
}

// webhookReport reads the webhook's refusals.
func (m *Main) webhookReport() webhookSection {
	w := webhookSection{Rejected: map[string]int64{}}
	for _, r := range callback.Reasons() {
		w.Rejected[r.String()] = m.webhook.Rejected(r)
	}
	return w
}

// resourcesSection says whether the resource store in Redis refuses
// acquires by its birth rule, until when and why.
type resourcesSection struct {
	// RefusedUntil is when acquires are granted again; empty while they
	// are not refused.
	RefusedUntil string `json:"acquires_refused_until,omitempty"`
	Why          string `json:"refused_because,omitempty"`
	// YoungRefusals counts the acquires refused by the birth rule.
	YoungRefusals uint64 `json:"young_refusals"`
}

// serviceSection says which build runs, since when, and how.
type serviceSection struct {
	Version       string      `json:"version"`
	Revision      string      `json:"revision,omitempty"`
	UptimeSeconds age.Seconds `json:"uptime_seconds"`
	Mode          string      `json:"mode"`    // VK_MODE
	DryRun        bool        `json:"dry_run"` // no community has a token: replies are logged
}

// countersSection is the bot's activity counters and the store they are in.
type countersSection struct {
	Store string `json:"store"`
	bot.ActivityReport
}

type vkSection struct {
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// Tokens is the state of every community token (bot.Bot.Tokens), as
	// vkcounter_vk_token_state shows it.
	Tokens []tokens.Status `json:"tokens"`
}

// memorySection is the last reading of the counters' Redis by its
// headroom guard (COUNTERS_REDIS_HEADROOM): used_memory against
// maxmemory, and the limit past which new counter names are refused.
type memorySection struct {
	Node       string      `json:"node"`
	UsedBytes  int64       `json:"used_bytes"`
	MaxBytes   int64       `json:"max_bytes"`   // 0: no maxmemory
	LimitBytes int64       `json:"limit_bytes"` // 0: nothing refused
	Full       bool        `json:"full"`
	Refused    uint64      `json:"new_names_refused"`
	Age        age.Seconds `json:"age_seconds"`
	// Unknown says why the guard cannot check used_memory (INFO refused
	// to the service's user, or inside scripts), when it cannot; the
	// figures above are then those of the last reading, if any.
	Unknown string `json:"unknown,omitempty"`
}

// statsDoc reads the process's figures: it makes no Redis call, so it
// answers at once while Redis is slow or down. Each figure read from
// Redis carries its age.
func (m *Main) statsDoc() statsDocument {
	v := version.Get()
	doc := statsDocument{
		Service: serviceSection{Version: v.Version, Revision: v.Revision, UptimeSeconds: age.Since(m.started),
			Mode: m.cfg.VKMode, DryRun: m.dryRun},
		WindowSeconds: int64(m.cfg.Window / time.Second),
		Redis:         m.redisKind(),
		Webhook:       m.webhookReport(),
		Bot:           m.bot.Stats(),
		LastDrops:     m.bot.LastDrops(),
		Outbox:        m.outbox.Report(m.groups...),
		Counters:      countersSection{Store: m.cfg.CountersStore, ActivityReport: m.bot.ActivityReport()},
		CounterPort:   m.metrics.Traffic(),
		TopTexts:      m.topTextsReport(),
		VK:            vkSection{ConsecutiveFailures: m.bot.ConsecutiveVKFailures(), Tokens: m.bot.Tokens()},
	}
	if r := m.guard.Last(); r != nil {
		doc.RedisMemory = &memorySection{Node: r.Node, UsedBytes: r.Used, MaxBytes: r.Max, LimitBytes: r.Limit,
			Full: r.Full(), Refused: m.guard.Refusals(), Age: age.Since(r.At)}
	}
	if err := m.guard.Unknown(); err != nil {
		if doc.RedisMemory == nil {
			doc.RedisMemory = &memorySection{Refused: m.guard.Refusals()}
		}
		doc.RedisMemory.Unknown = err.Error()
	}
	if m.pollers != nil {
		doc.Longpoll = m.pollers.Stats()
	}
	if m.resources != nil {
		doc.Resources = &resourcesSection{YoungRefusals: m.resources.YoungRefusals()}
		if until, ok := m.resources.RefusedUntil(); ok {
			doc.Resources.RefusedUntil, doc.Resources.Why = until.UTC().Format(time.RFC3339Nano), resource.YoungReason
		}
	}
	return doc
}

// stats serves /stats: statsDoc as JSON.
func (m *Main) stats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(m.statsDoc())
}
