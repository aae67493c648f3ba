package freq_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// seenAt calls SeenAt and fails t on error.
func seenAt(t testing.TB, s *freq.Store, identity string, at time.Time) int64 {
	t.Helper()
	n, err := s.SeenAt(context.Background(), identity, at)
	if err != nil {
		t.Fatalf("SeenAt(%q, %d): %v", identity, at.Unix(), err)
	}
	return n
}

// snapshot is what Redis holds under a prefix: every key with its value
// and TTL (to the hour), sorted.
func snapshot(t testing.TB, tg *redistest.Target, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, k := range redistest.Keys(t, tg.Client, prefix) {
		var v any
		var err error
		switch typ := tg.Client.Type(ctx, k).Val(); typ {
		case "string":
			v, err = tg.Client.Get(ctx, k).Result()
		case "list":
			v, err = tg.Client.LRange(ctx, k, 0, -1).Result()
		case "hash":
			v, err = tg.Client.HGetAll(ctx, k).Result()
		default:
			t.Fatalf("%s is a %s", k, typ)
		}
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		out = append(out, fmt.Sprintf("%q %v %v", k, v, tg.Client.PTTL(ctx, k).Val().Round(time.Hour)))
	}
	slices.Sort(out)
	return out
}

// TestSeenIsNextAnswer: at any second, Seen answers the previous the next
// message of the text gets at that second, for a text seen once, seen in
// bursts, going quiet past the window, and with its clock behind; reading
// changes no key.
func TestSeenIsNextAnswer(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 60
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		prefix, _, _ := strings.Cut(s.Keys("x")[0], "f:{")
		rng := rand.New(rand.NewPCG(1, 2))
		steps := 400
		if tg.Kind == redistest.Mini {
			steps = 150 // miniredis builds a Lua interpreter per call
		}
		var now int64
		texts := []string{"a", "b", "c"}
		for i := range steps {
			// Mostly short steps, some past the window, some backwards
			// (a clock behind the text's newest second).
			switch r := rng.IntN(20); {
			case r == 0:
				now += w + int64(rng.IntN(5))
			case r == 1:
				now -= int64(rng.IntN(5))
			default:
				now += int64(rng.IntN(4))
			}
			text := texts[rng.IntN(len(texts))]
			if seenAt(t, s, "never", sec(now)) != 0 {
				t.Fatal("a text never counted is seen")
			}
			before := snapshot(t, tg, prefix)
			got := seenAt(t, s, text, sec(now))
			if after := snapshot(t, tg, prefix); !slices.Equal(before, after) {
				t.Fatalf("step %d: Seen changed Redis:\nbefore %v\nafter  %v", i, before, after)
			}
			if r := count(t, s, text, fmt.Sprint("m", i), sec(now)); r.Previous != got {
				t.Fatalf("step %d, text %q at %d: Seen %d, the next count answered %d", i, text, now, got, r.Previous)
			}
		}
	})
}

// TestSeenHotText: a text whose list form holds many seconds, of which
// the oldest leave the window, is read as the next count answers it.
func TestSeenHotText(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		const w = 600
		s := newStore(t, tg, freq.Options{Window: w * time.Second})
		for i := range int64(1000) {
			count(t, s, "hot", "", sec(i))
			if i%3 == 0 {
				count(t, s, "hot", "", sec(i))
			}
		}
		for _, at := range []int64{999, 1000, 1300, 1598, 1599, 1600} {
			got := seenAt(t, s, "hot", sec(at))
			want := int64(0)
			for i := at - w + 1; i <= 999; i++ {
				if i >= 0 {
					want++
					if i%3 == 0 {
						want++
					}
				}
			}
			if got != want {
				t.Errorf("at %d: Seen %d, want %d", at, got, want)
			}
		}
		if r := count(t, s, "hot", "", sec(1300)); r.Previous != seenAt(t, s, "hot", sec(1300))-1 {
			t.Errorf("count at 1300 answered %d, Seen after it %d", r.Previous, seenAt(t, s, "hot", sec(1300)))
		}
	}, redistest.Mini, redistest.Real)
}

// TestSeenNow: Seen on Redis's clock counts what was just counted.
func TestSeenNow(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{})
		ctx := context.Background()
		for range 3 {
			countNow(t, s, "now", "")
		}
		if n, err := s.Seen(ctx, "now"); err != nil || n != 3 {
			t.Errorf("Seen = %d, %v; want 3", n, err)
		}
		if n, err := s.Seen(ctx, "other"); err != nil || n != 0 {
			t.Errorf("Seen of a text never counted = %d, %v; want 0", n, err)
		}
	})
}

// roundTrips counts what a client sends: pipelines, and commands sent
// alone (those that set up a connection left out).
type roundTrips struct{ pipelines, single atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hello", "client", "auth", "select", "readonly", "cluster":
		default:
			r.single.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// TestSeenManyOneRoundTrip: SeenMany answers what Seen answers for each
// identity, in order, in one pipeline and no command sent alone, and
// changes nothing in Redis (no key made, no TTL touched).
func TestSeenManyOneRoundTrip(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		s := newStore(t, tg, freq.Options{Window: time.Hour})
		prefix, _, _ := strings.Cut(s.Keys("x")[0], "f:{")
		for range 3 {
			countNow(t, s, "a", "")
		}
		countNow(t, s, "b", "")
		ids := []string{"a", "b"}
		for i := range 198 {
			ids = append(ids, fmt.Sprint("never ", i))
		}
		ctx := context.Background()
		if _, err := s.SeenMany(ctx, ids[:1]); err != nil { // the script loaded
			t.Fatal(err)
		}
		before := snapshot(t, tg, prefix)
		trips := &roundTrips{}
		tg.Client.AddHook(trips)
		got, err := s.SeenMany(ctx, ids)
		p, n := trips.pipelines.Load(), trips.single.Load()
		if err != nil || len(got) != len(ids) || got[0] != 3 || got[1] != 1 || slices.Max(got[2:]) != 0 {
			t.Fatalf("SeenMany = %v, %v; want 3, 1 and 198 zeros", got, err)
		}
		if p != 1 || n != 0 {
			t.Errorf("SeenMany of %d texts: %d pipelines and %d commands alone, want one pipeline", len(ids), p, n)
		}
		if after := snapshot(t, tg, prefix); !slices.Equal(before, after) {
			t.Errorf("SeenMany changed Redis:\nbefore %v\nafter  %v", before, after)
		}
		for i, id := range ids[:3] {
			if n, err := s.Seen(ctx, id); err != nil || n != got[i] {
				t.Errorf("Seen(%q) = %d, %v; SeenMany said %d", id, n, err, got[i])
			}
		}
		if got, err := s.SeenMany(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("SeenMany of none = %v, %v", got, err)
		}
	})
}
