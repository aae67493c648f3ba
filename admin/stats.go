package admin

import (
	"encoding/json"
	"net/http"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/metrics"
)

// Stats is /stats: each section is its owner's report. The status page
// (/) shows the same document: one reading serves both. Reading it makes
// no Redis call; each figure read from Redis carries its age.
type Stats struct {
	Service       ServiceSection            `json:"service"`
	WindowSeconds int64                     `json:"window_seconds"`
	Redis         string                    `json:"redis"`
	Webhook       WebhookSection            `json:"webhook"`
	Bot           bot.Stats                 `json:"bot"`
	LastDrops     []bot.DroppedReply        `json:"last_drops,omitempty"` // the last few replies dropped, and why
	Outbox        outbox.Report             `json:"outbox"`
	Counters      CountersSection           `json:"counters"`
	CounterPort   metrics.Traffic           `json:"counter_port"`
	RedisMemory   *MemorySection            `json:"redis_memory,omitempty"`
	VK            VKSection                 `json:"vk"`
	Longpoll      map[string]longpoll.Stats `json:"longpoll,omitempty"`
	Resources     *ResourcesSection         `json:"resources,omitempty"` // RESOURCE_STORE=redis
	TopTexts      *TopTextsSection          `json:"top_texts,omitempty"` // TOP_TEXTS
}

// WebhookSection is what the webhook refused (callback.Handler.Rejected),
// as vkcounter_webhook_rejected_total counts it.
type WebhookSection struct {
	// Rejected is the requests refused by reason (callback.Reason's
	// names), every reason present; none in VK_MODE=longpoll, where the
	// webhook is not served.
	Rejected map[string]int64 `json:"rejected"`
}

// ResourcesSection says whether the resource store in Redis refuses
// acquires by its birth rule, until when and why.
type ResourcesSection struct {
	// RefusedUntil is when acquires are granted again; empty while they
	// are not refused.
	RefusedUntil string `json:"acquires_refused_until,omitempty"`
	Why          string `json:"refused_because,omitempty"`
	// YoungRefusals counts the acquires refused by the birth rule.
	YoungRefusals uint64 `json:"young_refusals"`
}

// ServiceSection says which build runs, since when, and how.
type ServiceSection struct {
	Version       string      `json:"version"`
	Revision      string      `json:"revision,omitempty"`
	UptimeSeconds age.Seconds `json:"uptime_seconds"`
	Mode          string      `json:"mode"`    // VK_MODE
	DryRun        bool        `json:"dry_run"` // no community has a token: replies are logged
}

// CountersSection is the bot's activity counters and the store they are
// in.
type CountersSection struct {
	Store string `json:"store"`
	bot.ActivityReport
}

// VKSection is VK as the bot sees it.
type VKSection struct {
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// Tokens is the state of every community token (bot.Bot.Tokens), as
	// vkcounter_vk_token_state shows it.
	Tokens []tokens.Status `json:"tokens"`
}

// MemorySection is the last reading of the counters' Redis by its
// headroom guard (COUNTERS_REDIS_HEADROOM): used_memory against
// maxmemory, and the limit past which new counter names are refused.
type MemorySection struct {
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

// stats serves /stats: the source's Stats as JSON.
func (a *Admin) stats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a.src.Stats())
}
