package window_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// newRedis returns a Redis store on tg under a fresh test prefix, and the
// prefix: the store's keys start with it followed by "w:".
func newRedis(t *testing.T, tg *redistest.Target) (*window.Redis, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	r, err := window.NewRedis(tg.Client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return r, prefix
}

// TestRedisKeys pins the key layout: a run-length list and a total per
// (name, window) under the name's hash tag, expiring a minute after the
// window; and that without WithClock the store reads Redis's TIME.
func TestRedisKeys(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s, prefix := newRedis(t, tg)
		hit(t, s, "api:42", time.Hour, 0)
		hit(t, s, "api:42", time.Hour, 1)
		list, total := prefix+"w:{api:42}:3600:l", prefix+"w:{api:42}:3600:n"
		for _, k := range []string{list, total} {
			if ttl, err := tg.Client.TTL(ctx, k).Result(); err != nil || ttl <= 3650*time.Second || ttl > 3660*time.Second {
				t.Fatalf("TTL(%s) = %v, %v; want 3660s", k, ttl, err)
			}
		}
		if n, err := tg.Client.Get(ctx, total).Int64(); err != nil || n != 2 {
			t.Fatalf("total = %d, %v; want 2", n, err)
		}
		got := redistest.Keys(t, tg.Client, prefix)
		slices.Sort(got)
		if want := []string{list, total}; !slices.Equal(got, want) {
			t.Fatalf("keys = %q, want %q", got, want)
		}
		if tg.Mini == nil {
			return
		}
		// Redis's clock decides: move miniredis's TIME past the window.
		tg.Mini.SetTime(time.Now().Add(time.Hour + 2*time.Second))
		count(t, s, "api:42", time.Hour, 0)
	})
}

// TestRedisNameKeys: every name's two keys share one Redis Cluster slot,
// including names with braces, and a name starting with "}" (whose hash
// tag would be empty) gets a digest tag instead, whose keys no other name
// can take: not even the name spelling out that digest.
func TestRedisNameKeys(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s, prefix := newRedis(t, tg)
		sum := sha256.Sum256([]byte("}x"))
		digest := hex.EncodeToString(sum[:16])
		sum = sha256.Sum256([]byte("}"))
		digestBrace := hex.EncodeToString(sum[:16])
		for _, tc := range []struct{ name, tag, rest string }{
			{"api", "{api}", ""},
			{"a}b", "{a}b}", ""},
			{"{x", "{{x}", ""},
			{"{}", "{{}}", ""},
			{"}x", "{#" + digest + "}#", ""},
			{"}", "{#" + digestBrace + "}#", ""},
			// A name spelling out the digest form keeps the plain layout.
			{"#" + digest, "{#" + digest + "}", ""},
			{"#" + digest + "}#", "{#" + digest + "}#}", ""},
		} {
			hit(t, s, tc.name, time.Minute, 0)
			hit(t, s, tc.name, time.Minute, 1)
			count(t, s, tc.name, time.Minute, 2)
			base := prefix + "w:" + tc.tag + ":60:"
			for _, k := range []string{base + "l", base + "n"} {
				if n, err := tg.Client.Exists(ctx, k).Result(); err != nil || n != 1 {
					t.Fatalf("%q: key %q exists %d, %v", tc.name, k, n, err)
				}
			}
			if tg.Kind == redistest.Cluster {
				a, err1 := tg.Client.ClusterKeySlot(ctx, base+"l").Result()
				b, err2 := tg.Client.ClusterKeySlot(ctx, base+"n").Result()
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("%q: slots %d, %d (%v, %v)", tc.name, a, b, err1, err2)
				}
			}
		}
		// Each name counted its own two hits: no two names shared keys.
		if got := len(redistest.Keys(t, tg.Client, prefix)); got != 2*8 {
			t.Fatalf("%d keys, want %d", got, 2*8)
		}
	})
}

// TestRedisLostTotal: a total key lost (evicted) is recounted from the
// list by both scripts.
func TestRedisLostTotal(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		r, prefix := newRedis(t, tg)
		c := newClock(t0)
		s := r.WithClock(c.Now)
		for i := range 5 {
			c.Set(t0 + int64(i))
			hit(t, s, "n", time.Minute, int64(i))
		}
		tg.Client.Del(ctx, prefix+"w:{n}:60:n")
		count(t, s, "n", time.Minute, 5)
		tg.Client.Del(ctx, prefix+"w:{n}:60:n")
		hit(t, s, "n", time.Minute, 5)
		c.Set(t0 + 62)
		count(t, s, "n", time.Minute, 3)
	})
}

// TestRedisMalformedTail: an entry of a counter's list that does not parse
// (only a foreign write makes one) is popped when it reaches an end of the
// list, rather than failing every call on the counter until it expires.
func TestRedisMalformedTail(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		r, prefix := newRedis(t, tg)
		c := newClock(t0 + 10)
		s := r.WithClock(c.Now)
		const w = 100 * time.Second
		hit(t, s, "n", w, 0)
		c.Set(t0 + 20)
		hit(t, s, "n", w, 1)
		list := prefix + "w:{n}:100:l"
		if err := tg.Client.RPush(ctx, list, "x:1").Err(); err != nil {
			t.Fatal(err)
		}
		c.Set(t0 + 30)
		count(t, s, "n", w, 2)
		hit(t, s, "n", w, 2)
		want := []string{strconv.Itoa(t0 + 10), strconv.Itoa(t0 + 20), strconv.Itoa(t0 + 30)}
		if got, err := tg.Client.LRange(ctx, list, 0, -1).Result(); err != nil || !slices.Equal(got, want) {
			t.Fatalf("list = %q, %v; want %q", got, err, want)
		}
	})
}

// TestRedisNil: a nil client is an error.
func TestRedisNil(t *testing.T) {
	if _, err := window.NewRedis(nil, "p:"); err == nil {
		t.Fatal("NewRedis(nil) succeeded")
	}
}

// TestRedisBounded: in Redis too a hot counter keeps at most one list
// entry per second of its window, however many hits.
func TestRedisBounded(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		r, prefix := newRedis(t, tg)
		c := newClock(t0)
		s := r.WithClock(c.Now)
		for sec := int64(0); sec < 150; sec++ {
			c.Set(t0 + sec)
			for range 3 {
				if _, err := s.Hit(ctx, "hot", 100*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := tg.Client.LLen(ctx, prefix+"w:{hot}:100:l").Result(); err != nil || n > 100 {
				t.Fatalf("at second %d the list holds %d entries (%v); want at most 100", sec, n, err)
			}
		}
		count(t, s, "hot", 100*time.Second, 300)
	}, redistest.Mini, redistest.Real)
}
