package main

import (
	"context"
	"errors"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/age"
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
	m.top = top
	return topTextsRecorder{next: rec, top: top}, nil
}

// topTextsSection is /stats' top_texts (TOP_TEXTS): the texts with the
// highest count this instance has seen in the window.
type topTextsSection struct {
	SeenBy string    `json:"seen_by"` // always "this instance"
	Max    int       `json:"max"`     // TOP_TEXTS
	Texts  []topText `json:"texts"`   // the highest count first
}

// A topText is one of the top texts: its community and text (or, without
// text, its attachments), its count when this instance last saw it, and
// how long ago that was.
type topText struct {
	GroupID     int         `json:"group_id"`
	Text        string      `json:"text"`
	Attachments []string    `json:"attachments,omitempty"`
	Cut         bool        `json:"cut,omitempty"` // the text is longer than shown (toptexts.MaxKeyBytes)
	Count       int64       `json:"count"`
	Seen        age.Seconds `json:"seen_seconds_ago"`
}

// topTextsReport reads the top texts; nil with TOP_TEXTS=0.
func (m *Main) topTextsReport() *topTextsSection {
	if m.top == nil {
		return nil
	}
	s := &topTextsSection{SeenBy: "this instance", Max: m.top.N(), Texts: []topText{}}
	for _, e := range m.top.Top(time.Now()) {
		g, text, atts, ok := bot.SplitTextKey(e.Key)
		if !ok {
			continue
		}
		s.Texts = append(s.Texts, topText{GroupID: g, Text: text, Attachments: atts, Cut: e.Cut, Count: e.Count, Seen: age.Since(e.Seen)})
	}
	return s
}
