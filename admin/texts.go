package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
)

// MaxAnswers bounds the answers of one `vkcounter count` or /texts
// question (texts times communities).
const MaxAnswers = 1000

// MaxTextsAtOnce is how many /texts requests are answered at once; more
// get 503 with Retry-After at once. With MaxAnswers look-ups each, it
// bounds the work /texts queues in Redis, whoever asks.
const MaxTextsAtOnce = 2

// A Counter reads how many occurrences of text keys the window holds,
// without changing anything (freq.Store).
type Counter interface {
	// Window is the counting window.
	Window() time.Duration
	// SeenMany returns, for each identity in order, how many of its
	// occurrences are inside the window now (the previous the next count
	// of it would answer), in one round trip to Redis.
	SeenMany(ctx context.Context, identities []string) ([]int64, error)
}

// A Question is what `vkcounter count` and /texts are asked: texts, or
// the attachments of one message without text, in one community or in
// each the service serves.
type Question struct {
	Texts       []string
	Attachments []string // attachment keys (bot.ParseAttachmentKey), in order
	Group       int      // 0: every community
}

// A TextCount is one answer: how many messages of the community with the
// text (or, without text, the attachments) the window holds, which is the
// number the bot's next reply to such a message shows.
type TextCount struct {
	GroupID     int      `json:"group_id"`
	Text        string   `json:"text"`
	Attachments []string `json:"attachments,omitempty"`
	Count       int64    `json:"count"`
}

// Answer is the answer of /texts and `vkcounter count -json`.
type Answer struct {
	WindowSeconds int64       `json:"window_seconds"`
	Normalize     bool        `json:"normalize"`
	Texts         []TextCount `json:"texts"`
}

// Messages returns the messages q asks about, one per text (or one with
// the attachments) and community of groups, or why q is wrong.
func (q Question) Messages(groups []int) ([]callback.Message, error) {
	if q.Group != 0 {
		if !slices.Contains(groups, q.Group) {
			return nil, fmt.Errorf("community %d is not served (served: %s)", q.Group, joinInts(groups))
		}
		groups = []int{q.Group}
	}
	var atts []callback.Attachment
	for _, s := range q.Attachments {
		a, err := bot.ParseAttachmentKey(s)
		if err != nil {
			return nil, err
		}
		atts = append(atts, a)
	}
	texts := q.Texts
	switch {
	case len(atts) > 0 && len(texts) > 0:
		return nil, errors.New("give texts or attachments, not both: a message with text is counted by its text alone")
	case len(atts) > 0:
		texts = []string{""}
	case len(texts) == 0:
		return nil, errors.New("no text to look up: give one or more texts, or the attachments of a message without text")
	}
	if n := len(texts) * len(groups); n > MaxAnswers {
		return nil, fmt.Errorf("%d texts in %d communities are %d look-ups, more than %d: ask fewer, or one community", len(texts), len(groups), n, MaxAnswers)
	}
	var ms []callback.Message
	for _, g := range groups {
		for _, t := range texts {
			ms = append(ms, callback.Message{GroupID: g, Text: t, Attachments: atts})
		}
	}
	return ms, nil
}

// Count answers the messages ms (Question.Messages) from c, with the
// bot's text key (normalize as NORMALIZE); attachments are the
// question's keys, given back with each answer. It only reads, all the
// messages in one SeenMany: one round trip to Redis.
func Count(ctx context.Context, c Counter, normalize bool, ms []callback.Message, attachments []string) (Answer, error) {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = bot.TextKey(m, normalize)
	}
	counts, err := c.SeenMany(ctx, keys)
	if err != nil {
		return Answer{}, err
	}
	if len(counts) != len(ms) {
		return Answer{}, fmt.Errorf("%d counts for %d texts", len(counts), len(ms))
	}
	ans := Answer{WindowSeconds: int64(c.Window() / time.Second), Normalize: normalize, Texts: make([]TextCount, 0, len(ms))}
	for i, m := range ms {
		ans.Texts = append(ans.Texts, TextCount{GroupID: m.GroupID, Text: m.Text, Attachments: attachments, Count: counts[i]})
	}
	return ans, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// TextsOptions are what /texts reads.
type TextsOptions struct {
	Counter   Counter
	Groups    []int         // the communities served
	Normalize bool          // NORMALIZE
	Timeout   time.Duration // one question's time in Redis (REDIS_TIMEOUT)
}

// texts serves GET /texts?text=…[&text=…][&attachment=…][&group=ID]:
// Count's answer as JSON, read in one round trip to Redis; 400 for a wrong question (a text that is not
// UTF-8 among them), 503 when Redis does not answer or MaxTextsAtOnce
// requests are under way. It writes nothing.
func (a *Admin) texts(w http.ResponseWriter, r *http.Request) {
	select {
	case a.textsBusy <- struct{}{}:
		defer func() { <-a.textsBusy }()
	default:
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, fmt.Errorf("%d /texts requests are under way, the most at once: ask again", MaxTextsAtOnce))
		return
	}
	v := r.URL.Query()
	q := Question{Texts: v["text"], Attachments: v["attachment"]}
	for _, t := range q.Texts {
		if !utf8.ValidString(t) {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("text %q: not UTF-8 (VK's texts always are)", t))
			return
		}
	}
	var err error
	if g := v.Get("group"); g != "" {
		if q.Group, err = strconv.Atoi(g); err != nil || q.Group <= 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("group %q: want a community id", g))
			return
		}
	}
	o := a.textsOpts
	ms, err := q.Messages(o.Groups)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
	defer cancel()
	ans, err := Count(ctx, o.Counter, o.Normalize, ms, q.Attachments)
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, fmt.Errorf("redis: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ans)
}

// writeJSONError answers {"error": err} with status.
func writeJSONError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{err.Error()})
}
