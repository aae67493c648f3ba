package freq_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// base is an arbitrary fixed second for tests with an explicit clock.
var base = time.Unix(1_700_000_000, 0)

// sec returns base plus n seconds.
func sec(n int64) time.Time { return base.Add(time.Duration(n) * time.Second) }

// newStore returns a Store on tg with its keys under a fresh test prefix,
// which are deleted when t ends.
func newStore(t testing.TB, tg *redistest.Target, opts freq.Options) *freq.Store {
	t.Helper()
	prefix := redistest.Prefix(t)
	opts.Prefix = prefix
	t.Cleanup(func() {
		// One DEL per key: a multi-key DEL would cross slots on a cluster.
		for _, k := range redistest.Keys(t, tg.Client, prefix) {
			tg.Client.Del(context.Background(), k)
		}
	})
	return mustNew(t, tg.Client, opts)
}

// mustNew is freq.New for options the test knows are valid.
func mustNew(t testing.TB, rdb redis.Scripter, opts freq.Options) *freq.Store {
	t.Helper()
	s, err := freq.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// count calls CountAt and fails t on error.
func count(t testing.TB, s *freq.Store, identity, eventID string, at time.Time) freq.Result {
	t.Helper()
	r, err := s.CountAt(context.Background(), identity, eventID, at)
	if err != nil {
		t.Fatalf("CountAt(%q, %q, %d): %v", identity, eventID, at.Unix(), err)
	}
	return r
}

// countNow calls CountResult (Count with the whole Result) and fails t on
// error.
func countNow(t testing.TB, s *freq.Store, identity, eventID string) freq.Result {
	t.Helper()
	r, err := s.CountResult(context.Background(), identity, eventID)
	if err != nil {
		t.Fatalf("Count(%q, %q): %v", identity, eventID, err)
	}
	return r
}

// state is what Redis holds for one identity.
type state struct {
	List  []string
	Total string // "" when the key does not exist
}

// stateOf reads the list and total of identity.
func stateOf(t testing.TB, tg *redistest.Target, s *freq.Store, identity string) state {
	t.Helper()
	ctx := context.Background()
	k := s.Keys(identity, "")
	l, err := tg.Client.LRange(ctx, k[0], 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", k[0], err)
	}
	n, err := tg.Client.Get(ctx, k[1]).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s: %v", k[1], err)
	}
	return state{List: l, Total: n}
}

// sumList adds up a run-length list, checking that its seconds strictly
// increase and every count is at least 2 when written out.
func sumList(t testing.TB, list []string) int64 {
	t.Helper()
	var total, last int64
	for i, e := range list {
		s, n, found := strings.Cut(e, ":")
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("entry %d %q: bad second", i, e)
		}
		c := int64(1)
		if found {
			if c, err = strconv.ParseInt(n, 10, 64); err != nil || c < 2 {
				t.Fatalf("entry %d %q: bad count", i, e)
			}
		}
		if i > 0 && sec <= last {
			t.Fatalf("entry %d %q: second not after %d", i, e, last)
		}
		last = sec
		total += c
	}
	return total
}

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key without one, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
