package admin

import (
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/internal/age"
	"github.com/vkcounter/vkcounter/internal/toptexts"
)

// TopTextsSection is /stats' top_texts (TOP_TEXTS): the texts with the
// highest count this instance has seen in the window.
type TopTextsSection struct {
	SeenBy string    `json:"seen_by"` // always "this instance"
	Max    int       `json:"max"`     // TOP_TEXTS
	Texts  []TopText `json:"texts"`   // the highest count first
}

// A TopText is one of the top texts: its community and text (or, without
// text, its attachments), its count when this instance last saw it, and
// how long ago that was.
type TopText struct {
	GroupID     int         `json:"group_id"`
	Text        string      `json:"text"`
	Attachments []string    `json:"attachments,omitempty"`
	Cut         bool        `json:"cut,omitempty"` // the text is longer than shown (toptexts.MaxKeyBytes)
	Count       int64       `json:"count"`
	Seen        age.Seconds `json:"seen_seconds_ago"`
}

// TopTexts reads the top texts of table (keyed by bot.TextKey) as of now;
// nil for a nil table (TOP_TEXTS=0).
func TopTexts(table *toptexts.Table, now time.Time) *TopTextsSection {
	if table == nil {
		return nil
	}
	s := &TopTextsSection{SeenBy: "this instance", Max: table.N(), Texts: []TopText{}}
	for _, e := range table.Top(now) {
		g, text, atts, ok := bot.SplitTextKey(e.Key)
		if !ok {
			continue
		}
		s.Texts = append(s.Texts, TopText{GroupID: g, Text: text, Attachments: atts, Cut: e.Cut, Count: e.Count, Seen: age.Seconds(now.Sub(e.Seen))})
	}
	return s
}
