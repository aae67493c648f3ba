package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
)

// statsDocument is /stats: each section is its owner's report.
type statsDocument struct {
	WindowSeconds int64                     `json:"window_seconds"`
	Redis         string                    `json:"redis"`
	Bot           bot.Stats                 `json:"bot"`
	Outbox        outbox.Report             `json:"outbox"`
	Counters      countersSection           `json:"counters"`
	VK            vkSection                 `json:"vk"`
	Longpoll      map[string]longpoll.Stats `json:"longpoll,omitempty"`
}

// countersSection is the bot's activity counters and the store they are in.
type countersSection struct {
	Store string `json:"store"`
	bot.ActivityReport
}

type vkSection struct {
	ConsecutiveFailures int64 `json:"consecutive_failures"`
}

// stats serves /stats from what the process already knows: it makes no
// Redis call, so it answers at once while Redis is slow or down. Each
// figure read from Redis carries its age.
func (m *Main) stats(w http.ResponseWriter, r *http.Request) {
	doc := statsDocument{
		WindowSeconds: int64(m.cfg.Window / time.Second),
		Redis:         m.redisKind(),
		Bot:           m.bot.Stats(),
		Outbox:        m.outbox.Report(m.groups...),
		Counters:      countersSection{Store: m.cfg.CountersStore, ActivityReport: m.bot.ActivityReport()},
		VK:            vkSection{ConsecutiveFailures: m.bot.ConsecutiveVKFailures()},
	}
	if m.pollers != nil {
		doc.Longpoll = m.pollers.Stats()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc)
}
