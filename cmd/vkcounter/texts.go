package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
)

// maxTextAnswers bounds the answers of one `vkcounter count` or /texts
// call (texts times communities): each is one script run.
const maxTextAnswers = 1000

// A textsQuestion is what `vkcounter count` and /texts are asked: texts,
// or the attachments of one message without text, in one community or
// in each the service serves.
type textsQuestion struct {
	Texts       []string
	Attachments []string // attachment keys (bot.ParseAttachmentKey), in order
	Group       int      // 0: every community
}

// A textCount is one answer: how many messages of the community with the
// text (or, without text, the attachments) the window holds, which is the
// number the bot's next reply to such a message shows.
type textCount struct {
	GroupID     int      `json:"group_id"`
	Text        string   `json:"text"`
	Attachments []string `json:"attachments,omitempty"`
	Count       int64    `json:"count"`
}

// textsAnswer is the answer of /texts and `vkcounter count -json`.
type textsAnswer struct {
	WindowSeconds int64       `json:"window_seconds"`
	Normalize     bool        `json:"normalize"`
	Texts         []textCount `json:"texts"`
}

// messages returns the messages q asks about, one per text (or one with
// the attachments) and community of groups, or why q is wrong.
func (q textsQuestion) messages(groups []int) ([]callback.Message, error) {
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
	if n := len(texts) * len(groups); n > maxTextAnswers {
		return nil, fmt.Errorf("%d texts in %d communities are %d look-ups, more than %d: ask fewer, or one community", len(texts), len(groups), n, maxTextAnswers)
	}
	var ms []callback.Message
	for _, g := range groups {
		for _, t := range texts {
			ms = append(ms, callback.Message{GroupID: g, Text: t, Attachments: atts})
		}
	}
	return ms, nil
}

// countTexts answers the messages ms (textsQuestion.messages) from store,
// with the bot's text key (normalize as NORMALIZE); attachments are the
// question's keys, given back with each answer. It only reads
// (freq.Store.Seen).
func countTexts(ctx context.Context, store *freq.Store, normalize bool, ms []callback.Message, attachments []string) (textsAnswer, error) {
	ans := textsAnswer{WindowSeconds: int64(store.Window() / time.Second), Normalize: normalize, Texts: make([]textCount, 0, len(ms))}
	for _, m := range ms {
		n, err := store.Seen(ctx, bot.TextKey(m, normalize))
		if err != nil {
			return textsAnswer{}, err
		}
		ans.Texts = append(ans.Texts, textCount{GroupID: m.GroupID, Text: m.Text, Attachments: attachments, Count: n})
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

// maxTextsAtOnce is how many /texts requests are answered at once; more
// get 503 with Retry-After at once. With maxTextAnswers look-ups each,
// it bounds the work /texts queues in Redis, whoever asks.
const maxTextsAtOnce = 2

// texts serves GET /texts?text=…[&text=…][&attachment=…][&group=ID] on the
// admin port: countTexts' answer as JSON; 400 for a wrong question (a
// text that is not UTF-8 among them), 503 when Redis does not answer or
// maxTextsAtOnce requests are under way. It writes nothing.
func (m *Main) texts(w http.ResponseWriter, r *http.Request) {
	select {
	case m.textsBusy <- struct{}{}:
		defer func() { <-m.textsBusy }()
	default:
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, fmt.Errorf("%d /texts requests are under way, the most at once: ask again", maxTextsAtOnce))
		return
	}
	v := r.URL.Query()
	q := textsQuestion{Texts: v["text"], Attachments: v["attachment"]}
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
	ms, err := q.messages(m.groups)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), m.cfg.RedisTimeout)
	defer cancel()
	ans, err := countTexts(ctx, m.store, m.cfg.Normalize, ms, q.Attachments)
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

const countHelp = `Usage: vkcounter count [-group ID] [-json] [serve flags] TEXT…
       vkcounter count [-group ID] [-json] [serve flags] -attachment KEY…

Prints how many times each TEXT was seen in the window by the service of
the same settings (environment and flags, as for "vkcounter serve"): the
number its next reply to that text will show (0 for a text never seen),
with its text key (NORMALIZE, one count per community). A message without
text is named by its attachments, in order (-attachment sticker:ID,
photo:OWNER_ID_ID, link:URL: as the bot keys them). It reads the service's
Redis (REDIS_URL or REDIS_CLUSTER) and writes nothing. Without either, the
service's Redis is embedded in it: count then asks the running service's
admin address (ADMIN_ADDR, GET /texts?text=…) and says so on stderr.

Output: one line per text and community, "COUNT<TAB>TEXT", with the
community first ("GROUP<TAB>COUNT<TAB>TEXT") when the service has several
(asked of the service: when its answer holds several);
-json prints the answer of /texts instead.

Flags:
  -group ID        only this community
  -attachment KEY  an attachment of the message (repeat, in order)
  -json            print JSON, as GET /texts answers

`

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runCount is `vkcounter count`.
func runCount(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("count", flag.ContinueOnError)
	var q textsQuestion
	fs.IntVar(&q.Group, "group", 0, "only this community")
	fs.Var((*listFlag)(&q.Attachments), "attachment", "an attachment of the message (repeat, in order)")
	asJSON := fs.Bool("json", false, "print JSON, as GET /texts answers")
	cfg, texts, err := parseConfigArgs(fs, args, getenv, withServeSettings(stdout, countHelp))
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return usageError(stderr, "count", err)
	}
	q.Texts = texts
	var ans textsAnswer
	var several bool // the community goes first on each line
	if cfg.RedisURL == "" && cfg.RedisCluster == "" {
		// The service's Redis is embedded in it: ask the service, once
		// the question is one (the communities are the service's to check).
		if _, err := (textsQuestion{Texts: q.Texts, Attachments: q.Attachments}).messages([]int{0}); err != nil {
			return usageError(stderr, "count", err)
		}
		var where string
		if ans, where, err = askService(ctx, cfg.AdminAddr, q); err != nil {
			return countFailed(stderr, err)
		}
		fmt.Fprintf(stderr, "asked the service at %s (no REDIS_URL or REDIS_CLUSTER: its Redis is embedded in it)\n", where)
		seen := map[int]bool{}
		for _, c := range ans.Texts {
			seen[c.GroupID] = true
		}
		several = len(seen) > 1
	} else if ans, several, err = countFromRedis(ctx, cfg, q); err != nil {
		return countFailed(stderr, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(ans)
		return exitOK
	}
	for _, c := range ans.Texts {
		what := c.Text
		if len(c.Attachments) > 0 {
			what = "[" + strings.Join(c.Attachments, " ") + "]"
		}
		if several {
			fmt.Fprintf(stdout, "%d\t", c.GroupID)
		}
		fmt.Fprintf(stdout, "%d\t%s\n", c.Count, what)
	}
	return exitOK
}

// A questionError is a question `count` or /texts refuses: a usage error.
type questionError struct{ error }

// countFailed reports err, `count`'s failure: exit 2 for a questionError,
// else 1.
func countFailed(stderr io.Writer, err error) int {
	if _, ok := errors.AsType[questionError](err); ok {
		return usageError(stderr, "count", err)
	}
	return failure(stderr, "count", err)
}

// countFromRedis answers q from the Redis of cfg, as the service of cfg
// counts; a questionError is q's fault. several says
// whether cfg serves more than one community.
func countFromRedis(ctx context.Context, cfg Config, q textsQuestion) (ans textsAnswer, several bool, err error) {
	communities, err := cfg.Communities()
	if err != nil {
		return textsAnswer{}, false, questionError{err}
	}
	var groups []int
	for _, c := range communities {
		groups = append(groups, c.GroupID)
	}
	ms, err := q.messages(groups)
	if err != nil {
		return textsAnswer{}, false, questionError{err}
	}
	redis.SetLogger(quietRedisLog{})
	rdb, store, where, err := openStore(ctx, cfg)
	if err != nil {
		return textsAnswer{}, false, err
	}
	defer rdb.Close()
	if ans, err = countTexts(ctx, store, cfg.Normalize, ms, q.Attachments); err != nil {
		return textsAnswer{}, false, fmt.Errorf("cannot read %s: %w", where, err)
	}
	return ans, len(groups) > 1, nil
}
