package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/internal/config"
)

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
	var q admin.Question
	fs.IntVar(&q.Group, "group", 0, "only this community")
	fs.Var((*listFlag)(&q.Attachments), "attachment", "an attachment of the message (repeat, in order)")
	asJSON := fs.Bool("json", false, "print JSON, as GET /texts answers")
	cfg, texts, err := config.Parse(fs, args, getenv, withServeSettings(stdout, countHelp))
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return usageError(stderr, "count", err)
	}
	q.Texts = texts
	var ans admin.Answer
	var several bool // the community goes first on each line
	if cfg.RedisURL == "" && cfg.RedisCluster == "" {
		// The service's Redis is embedded in it: ask the service, once
		// the question is one (the communities are the service's to check).
		if _, err := (admin.Question{Texts: q.Texts, Attachments: q.Attachments}).Messages([]int{0}); err != nil {
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
func countFromRedis(ctx context.Context, cfg config.Config, q admin.Question) (ans admin.Answer, several bool, err error) {
	communities, err := cfg.Communities()
	if err != nil {
		return admin.Answer{}, false, questionError{err}
	}
	var groups []int
	for _, c := range communities {
		groups = append(groups, c.GroupID)
	}
	ms, err := q.Messages(groups)
	if err != nil {
		return admin.Answer{}, false, questionError{err}
	}
	redis.SetLogger(quietRedisLog{})
	rdb, store, where, err := openStore(ctx, cfg)
	if err != nil {
		return admin.Answer{}, false, err
	}
	defer rdb.Close()
	if ans, err = admin.Count(ctx, store, cfg.Normalize, ms, q.Attachments); err != nil {
		return admin.Answer{}, false, fmt.Errorf("cannot read %s: %w", where, err)
	}
	return ans, len(groups) > 1, nil
}
