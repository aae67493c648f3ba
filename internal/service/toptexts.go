package service

import (
	"context"
	"errors"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/toptexts"
)

// topTextsRecorder passes each record on to next and feeds the count its
// reply carries (the text's count in the window, this message included) to
// the top texts (TOP_TEXTS): no Redis call of its own.
type topTextsRecorder struct {
	next bot.Recorder
	top  *toptexts.Table
}

func (r topTextsRecorder) Record(ctx context.Context, textKey, dedupeKey string, reply bot.Reply) (previous int64, duplicate bool, err error) {
	previous, duplicate, err = r.next.Record(ctx, textKey, dedupeKey, reply)
	if err == nil || errors.Is(err, outbox.ErrNotStored) { // counted
		r.top.Observe(textKey, previous+1, time.Now())
	}
	return previous, duplicate, err
}

// openTopTexts makes the top texts' table with TOP_TEXTS, and returns rec
// feeding it; with TOP_TEXTS=0 it keeps nothing and returns rec.
func (m *Main) openTopTexts(rec bot.Recorder) (bot.Recorder, error) {
	if m.cfg.TopTexts == 0 {
		return rec, nil
	}
	top, err := toptexts.New(m.cfg.TopTexts, m.cfg.Window)
	if err != nil {
		return nil, err
	}
	m.bot.top = top
	return topTextsRecorder{next: rec, top: top}, nil
}
