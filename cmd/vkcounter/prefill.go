package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

const prefillHelp = `Usage: vkcounter prefill [-expired N] [serve flags] < TEXTS

Stores N occurrences of every text read from stdin (one per line, at least
one text), at distinct seconds ending one second beyond WINDOW, where the
service counts them: in its Redis (REDIS_URL or REDIS_CLUSTER; an embedded
one cannot be written from outside), under its KEY_PREFIX, as the message a
user of each of its communities would send, normalised when NORMALIZE is
set. It reads the same settings as "vkcounter serve" (environment and
flags), so it writes exactly the keys the service reads; the next message
with such a text is answered as if they were not there, and its count
trims them. This is the seed's "expired" scenario (fill_redis_expired.php);
"vkcounter loadtest callback -expired N" runs it for its texts.

Flags:
  -expired N   occurrences stored per text and community (default 1)

`

// withServeSettings is the help of a command that takes serve's settings:
// its own text, then the settings table.
func withServeSettings(w io.Writer, help string) func() {
	return func() {
		fmt.Fprint(w, help)
		fmt.Fprintln(w, "Settings (as for serve):")
		config.PrintTable(w)
	}
}

// runPrefill is `vkcounter prefill`, reading the texts from stdin.
func runPrefill(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("prefill", flag.ContinueOnError)
	n := fs.Int("expired", 1, "occurrences stored per text and community")
	cfg, err := parseNoArgs(fs, args, getenv, withServeSettings(stdout, prefillHelp))
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return usageError(stderr, "prefill", err)
	case *n < 1:
		return usageError(stderr, "prefill", fmt.Errorf("-expired %d: must be at least 1", *n))
	}
	if err := needOutsideRedis(cfg, "write into it"); err != nil {
		return usageError(stderr, "prefill", err)
	}
	var texts []string
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		texts = append(texts, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return failure(stderr, "prefill", fmt.Errorf("read the texts: %w", err))
	}
	if len(texts) == 0 {
		return usageError(stderr, "prefill", errors.New("no texts on stdin: prefill reads the texts from stdin, one per line (vkcounter prefill < texts.txt)"))
	}
	// go-redis would print its own lines (a failed dial, retried) on
	// stderr; the one error returned says what failed.
	redis.SetLogger(quietRedisLog{})
	if err := prefill(ctx, cfg, texts, *n); err != nil {
		return failure(stderr, "prefill", err)
	}
	fmt.Fprintf(stdout, "stored %s of each of %s\n", plural(*n, "expired occurrence", "expired occurrences"), plural(len(texts), "text", "texts"))
	return exitOK
}

// needOutsideRedis refuses the embedded Redis for a command that must
// reach the service's Redis to do what (e.g. "read it"): it lives inside
// the service's process.
func needOutsideRedis(cfg config.Config, what string) error {
	if cfg.RedisURL == "" && cfg.RedisCluster == "" {
		return errors.New("REDIS_URL or REDIS_CLUSTER is needed: without them the service's Redis is embedded in its process, and nothing else can " + what)
	}
	return nil
}

// openStore opens the Redis of cfg, checks that it answers, and returns
// it with the count's store the service of cfg uses, and the Redis's name
// for messages (redisconn.Config.Where). The caller closes rdb.
func openStore(ctx context.Context, cfg config.Config) (rdb redis.UniversalClient, store *freq.Store, where string, err error) {
	if rdb, err = redisconn.Open(cfg.Redis()); err != nil {
		return nil, nil, "", err
	}
	if store, err = freq.New(rdb, freq.Options{Window: cfg.Window, Prefix: cfg.KeyPrefix, Cluster: cfg.RedisCluster != ""}); err != nil {
		rdb.Close()
		return nil, nil, "", err
	}
	where = cfg.Redis().Where()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, nil, "", fmt.Errorf("cannot reach %s: %w", where, unreachable(err))
	}
	return rdb, store, where, nil
}

// unreachable is why a connection failed: for a failed dial, the
// network's reason alone (the address is named by the caller).
func unreachable(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && op.Err != nil {
		return op.Err
	}
	return err
}

// prefill stores n occurrences of every text for every community of cfg,
// at distinct seconds ending one second beyond cfg.Window (freq's
// Prefill), under the keys the service of cfg reads.
func prefill(ctx context.Context, cfg config.Config, texts []string, n int) error {
	if err := needOutsideRedis(cfg, "write into it"); err != nil {
		return err
	}
	communities, err := cfg.Communities()
	if err != nil {
		return err
	}
	rdb, store, where, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := store.Load(ctx); err != nil {
		return fmt.Errorf("cannot store in %s: %w", where, err)
	}
	textKeys := func(yield func(string) bool) {
		for _, c := range communities {
			for _, text := range texts {
				if !yield(bot.TextKey(callback.Message{GroupID: c.GroupID, Text: text}, cfg.Normalize)) {
					return
				}
			}
		}
	}
	if err := store.Prefill(ctx, textKeys, n); err != nil {
		return fmt.Errorf("cannot store in %s: %w", where, err)
	}
	return nil
}
