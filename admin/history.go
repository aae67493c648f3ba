package admin

import (
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/history"
	"github.com/vkcounter/vkcounter/metrics"
)

// HistoryEvery is how often the history's totals should be sampled
// (History.Observe): a minute's start is known within that time.
const HistoryEvery = 10 * time.Second

// The history's series: messages counted, replies sent (or logged, in
// dry-run), the /counters/ API's requests, then one per counter opcode.
const (
	seriesMessages = iota
	seriesReplies
	seriesHTTP
	seriesOpcodes
)

// History is the status page's per-minute history of the messages
// counted, the replies sent and the counter requests, kept in memory
// (history.Ring): a sampler observes the totals every HistoryEvery, and
// each view of the page does too. It is safe for concurrent use.
type History struct{ ring *history.Ring }

// NewHistory returns an empty History.
func NewHistory() *History {
	return &History{ring: history.New(seriesOpcodes + len(wire.Opcodes()))}
}

// Observe samples the totals of s (the bot's) and t (the counter port's
// and the /counters/ API's) as of now.
func (h *History) Observe(now time.Time, s bot.Stats, t metrics.Traffic) {
	h.ring.Observe(now, totals(s, t))
}

// totals are the totals the history samples, in series order.
func totals(s bot.Stats, t metrics.Traffic) []int64 {
	out := make([]int64, seriesOpcodes+len(wire.Opcodes()))
	out[seriesMessages] = s.Received - s.Duplicates
	out[seriesReplies] = s.Sent + s.DryRun
	for _, n := range t.HTTP {
		out[seriesHTTP] += n
	}
	for i, op := range wire.Opcodes() {
		out[seriesOpcodes+i] = t.Requests[op.String()]
	}
	return out
}
