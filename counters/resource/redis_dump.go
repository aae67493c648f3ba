package resource

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Get returns the named counter's consumption, or ErrNotFound. Errors
// other than those wrap ErrStore.
func (r *Redis) Get(ctx context.Context, name []byte) (uint32, error) {
	if !validName(name) {
		return 0, ErrInvalid
	}
	e, err := parsePeek(r.run(ctx, peekScript, r.keys(name), r.interval))
	if err != nil {
		return 0, err
	}
	return e.Consumption, nil
}

// parsePeek decodes a peek reply. A name that is not a valid counter name
// (the keys were written by something else) is an error wrapping
// errBadName.
func parsePeek(cmd *redis.Cmd) (Entry, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrStore, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return Entry{}, fmt.Errorf("%w: peek reply %v", ErrStore, v)
	}
	name, ok1 := a[0].(string)
	c, ok2 := a[1].(int64)
	m, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 || c < 0 || m < 0 || c > 1<<32-1 || m > 1<<32-1 {
		return Entry{}, fmt.Errorf("%w: peek reply %v", ErrStore, v)
	}
	if !validName([]byte(name)) {
		return Entry{}, fmt.Errorf("%w: name of %d bytes", errBadName, len(name))
	}
	return Entry{Name: name, Consumption: uint32(c), MaxConsumption: uint32(m)}, nil
}

// errBadName is the error of a peek reply whose name is not a valid
// counter name: every acquire checks the name, so the counter's hash was
// written by something else.
var errBadName = fmt.Errorf("%w: invalid counter name in Redis", ErrStore)

// Dump calls fn for every counter in Redis under the prefix (of every
// instance), as Table.Dump, each once. It scans every master of a
// cluster, and the whole database: see scan for the cost. Its work in
// Redis is paged (a SCAN of scanCount keys, then a pipeline of at most
// peekPage scripts, each a round trip), and at most maxScans Dumps and
// Stats of this instance run at once: the others wait for their turn, so
// a flood of them cannot queue in Redis ahead of the renewals of leases
// (which also have connections of their own). A Dump that has not had its
// turn when ctx ends fails with ErrStore. A counter whose hash holds an
// invalid name (written by something else) is skipped, and logged.
func (r *Redis) Dump(ctx context.Context, fn func(Entry) error) error {
	select {
	case r.scans <- struct{}{}:
		defer func() { <-r.scans }()
	case <-ctx.Done():
		return fmt.Errorf("%w: dump: waiting for the %d dumps running: %v", ErrStore, maxScans, ctx.Err())
	case <-r.stop:
		return ErrClosed
	}
	return r.scan(ctx, func(keys []string) error {
		for len(keys) > 0 {
			page := keys[:min(len(keys), peekPage)]
			keys = keys[len(page):]
			if err := r.peekPage(ctx, page, fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// peekPage reads the counters of keys, their hash keys, in one round
// trip, and calls fn for each that exists.
func (r *Redis) peekPage(ctx context.Context, keys []string, fn func(Entry) error) error {
	var es []Entry
	var perr error
	_, err := redisconn.RunEach(ctx, r.rdb, len(keys), func(i int) (*redis.Script, []string, []any) {
		return peekScript, counterKeys(keys[i]), []any{r.interval}
	}, func(i int, cmd *redis.Cmd) {
		e, err := parsePeek(cmd)
		switch {
		case err == nil:
			es = append(es, e)
		case errors.Is(err, errBadName):
			r.log.Warn().Err(err).Str("key", keys[i]).Msg("resource counter with an invalid name in Redis: not listed")
		case !errors.Is(err, ErrNotFound) && perr == nil:
			perr = err
		}
	})
	if err != nil {
		return fmt.Errorf("%w: dump: %v", ErrStore, err)
	}
	if perr != nil {
		return perr
	}
	for _, e := range es {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// scan calls fn with batches of counter hash keys under the prefix,
// scanning every master of a cluster (fn is called one batch at a time),
// each key once.
//
// SCAN walks every key of the database, not only the counters' (MATCH
// filters what it returns, not what it reads): the cost grows with the
// whole database, scanCount keys per round trip. No index of the counters
// is kept because it could not stay in step with them: each counter is
// one cluster slot, changed by one script on that slot only, and an index
// key would be another slot, which a script cannot write atomically with
// the counter (nor would it expire with it). SCAN may return a key twice
// (while the database is rehashed, or a slot moves between masters);
// scan passes on each once, remembering the keys seen (16 bytes each).
func (r *Redis) scan(ctx context.Context, fn func(keys []string) error) error {
	// Exactly the counters' hash keys: prefix{32 hex digits}.
	match := escapeGlob(r.prefix) + "{" + strings.Repeat("[0-9a-f]", 32) + "}"
	var mu sync.Mutex // ForEachMaster scans the masters at once
	seen := map[[16]byte]struct{}{}
	fresh := func(keys []string) error {
		mu.Lock()
		defer mu.Unlock()
		out := keys[:0]
		for _, k := range keys {
			var id [16]byte
			tag, ok := strings.CutPrefix(k, r.prefix+"{")
			tag, ok2 := strings.CutSuffix(tag, "}")
			if !ok || !ok2 || len(tag) != 2*len(id) {
				continue // another prefix's key (see escapeGlob)
			}
			if _, err := hex.Decode(id[:], []byte(tag)); err != nil {
				continue // not hex: not a counter's key
			}
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
			out = append(out, k)
		}
		if len(out) == 0 {
			return nil
		}
		return fn(out)
	}
	one := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				return fmt.Errorf("%w: scan: %v", ErrStore, err)
			}
			if len(keys) > 0 {
				if err := fresh(keys); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	cc, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return one(ctx, r.rdb)
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return one(ctx, c)
	})
}

// escapeGlob returns a SCAN pattern that matches s: its pattern
// characters escaped, and each byte that is not part of valid UTF-8 (a
// prefix need not be UTF-8) replaced by ?, which matches any one byte.
// Such a pattern can match keys of other prefixes, which the caller must
// filter out; it is not sent as is because miniredis, the embedded Redis,
// compiles patterns to Go regular expressions and panics on one that is
// not UTF-8 (and ? matches an invalid byte there too).
func escapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n == 1:
			b.WriteByte('?')
		case strings.ContainsRune(`*?[]\`, c):
			b.WriteByte('\\')
			b.WriteByte(s[i])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Stats returns the store's statistics: Objects counts the counters in
// Redis (a scan), TotalObjects those this instance created, UsedMemory
// estimates the counters' memory as Table does (names plus a fixed
// overhead). Redis has no lock waits and no GC runs: the other fields are
// 0.
func (r *Redis) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := r.Dump(ctx, func(e Entry) error {
		s.Objects++
		s.UsedMemory += cost(len(e.Name))
		return nil
	})
	s.TotalObjects = r.created.Load()
	return s, err
}
