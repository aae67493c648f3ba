package freq

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// The package's Lua: text.lua, the text layout's functions, in front of
// every script; reply.lua, the reply queue's, in front of record.lua and
// queue.lua. Each file says what its keys, arguments and reply are.
var (
	//go:embed text.lua
	textLib string
	//go:embed reply.lua
	replyLib string
	//go:embed count.lua
	countMain string
	//go:embed record.lua
	recordMain string
	//go:embed queue.lua
	queueMain string
	//go:embed seen.lua
	seenMain string
)

// The scripts Store's Batcher runs are the functions of two libraries,
// count's (text.lua) and record's and queue's (text.lua and reply.lua),
// where a Redis 7 server runs functions (see redisconn.Library), else run
// with EVALSHA, falling back to EVAL when Redis's script cache does not
// hold them (after a restart or SCRIPT FLUSH); seen.lua, read rarely, is a
// script only.
var (
	countScript  = redisconn.NewLibrary("count", textLib, redisconn.Function{Name: "count", Main: countMain})[0]
	replyScripts = redisconn.NewLibrary("record", textLib+replyLib,
		redisconn.Function{Name: "record", Main: recordMain}, redisconn.Function{Name: "queue", Main: queueMain})
	recordScript, queueScript = replyScripts[0], replyScripts[1]
	seenScript                = redis.NewScript(textLib + seenMain)
	layoutScript              = redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1], 'NX') return redis.call('GET', KEYS[1])`)
)

// Layout is the version of the layout of the keys this build writes and
// reads: what each key holds (text.lua, reply.lua, count.lua). Layout 3
// keeps a reply's entry in one field (EntryField); layout 2, never
// released, in a field per part; layout 1, never released either, gave
// every text a key of its own, where layouts 2 and 3 keep a text seen once
// in a bucket (Options.BucketBits).
const Layout = 3

// unreleased names the layouts before Layout that no release wrote, which
// a build refuses without a migration.
var unreleased = map[int64]string{1: "a key per text", 2: "a reply's entry in a field per part"}

// ErrLayout is wrapped by Load's error when Redis holds keys written in a
// layout this build cannot read.
var ErrLayout = errors.New("freq: Redis holds keys of another layout")

// checkLayout writes this build's layout version and bucket bits to the
// marker ("3:11") unless one is there, and refuses any other. A marker
// holding a unix second was written by development builds before versions
// (it noted when their layout began).
func (s *Store) checkLayout(ctx context.Context) error {
	key := s.prefix + "layout"
	v, err := layoutScript.Run(ctx, s.rdb, []string{key}, s.layoutArg).Text()
	if err != nil {
		return fmt.Errorf("freq: read the layout's version: %w", err)
	}
	if v == s.layoutArg {
		return nil
	}
	reads := fmt.Sprintf("this build reads layout %d with %d bucket bits (%q) only", Layout, s.bucketBits, s.layoutArg)
	version, bits, _ := strings.Cut(v, ":")
	n, err := strconv.ParseInt(version, 10, 64)
	switch {
	case err == nil && n > 1e9:
		return fmt.Errorf("%w: %s holds %s, written by a development build before layout versions; %s: delete the keys under this KEY_PREFIX, or use another", ErrLayout, key, v, reads)
	case err == nil && unreleased[n] != "":
		return fmt.Errorf("%w: %s says the keys are in layout %d (%s, never released); %s: delete the keys under this KEY_PREFIX, or use another", ErrLayout, key, n, unreleased[n], reads)
	case err == nil && n == Layout:
		return fmt.Errorf("%w: %s says the keys are in layout %d with %s bucket bits; %s: run with BucketBits %s, or migrate the keys", ErrLayout, key, Layout, bits, reads, bits)
	default:
		return fmt.Errorf("%w: %s says the keys are in layout %q; %s: run a build that reads %q, or migrate the keys", ErrLayout, key, v, reads, v)
	}
}

// parseReply decodes the count's reply {previous, duplicate, time}.
func parseReply(v any) (result, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 3 {
		return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	var n [3]int64
	for i := range n {
		if n[i], ok = vals[i].(int64); !ok {
			return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
		}
	}
	if n[0] < 0 || n[1] < 0 || n[1] > 1 {
		return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	return result{Previous: n[0], Duplicate: n[1] == 1, Time: n[2]}, nil
}
