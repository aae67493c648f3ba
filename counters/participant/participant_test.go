package participant_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

// A clock is a settable test clock in whole seconds.
type clock struct{ sec atomic.Int64 }

func newClock(sec int64) *clock {
	c := &clock{}
	c.sec.Store(sec)
	return c
}

func (c *clock) Now() time.Time { return time.Unix(c.sec.Load(), 0) }
func (c *clock) Set(sec int64)  { c.sec.Store(sec) }

// opener opens a fresh, empty store of one kind reading the time from now.
type opener func(t *testing.T, now func() time.Time) participant.Store

// forEachStore runs body once per store kind: memory, file, and Redis on
// every backend redistest offers.
func forEachStore(t *testing.T, body func(t *testing.T, open opener)) {
	t.Run("memory", func(t *testing.T) {
		body(t, func(t *testing.T, now func() time.Time) participant.Store {
			return participant.NewMemory(now, participant.MemoryLimits{})
		})
	})
	t.Run("file", func(t *testing.T) {
		body(t, func(t *testing.T, now func() time.Time) participant.Store {
			return newFile(t, t.TempDir()+"/bbs.cnt", now)
		})
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
			body(t, func(t *testing.T, now func() time.Time) participant.Store {
				// No cleanup needed: every Visit sets the key to expire.
				return newRedis(t, tg.Client, redistest.Prefix(t)).WithClock(now)
			})
		})
	})
}

func newFile(t testing.TB, path string, now func() time.Time) *participant.File {
	t.Helper()
	f, err := participant.NewFile(path, now)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func visit(t testing.TB, s participant.Store, name, key string, timeout time.Duration, wantActive int, wantNew bool) {
	t.Helper()
	n, isNew, err := participant.Visit(context.Background(), s, name, key, timeout)
	if err != nil {
		t.Fatalf("Visit(%q, %q): %v", name, key, err)
	}
	if n != wantActive || isNew != wantNew {
		t.Fatalf("Visit(%q, %q) = %d, new %v; want %d, new %v", name, key, n, isNew, wantActive, wantNew)
	}
}

func visitMany(t testing.TB, s participant.Store, name string, keys []string, timeout time.Duration, wantActive, wantAdded int) {
	t.Helper()
	n, added, err := s.VisitMany(context.Background(), name, keys, timeout)
	if err != nil {
		t.Fatalf("VisitMany(%q, %q): %v", name, keys, err)
	}
	if n != wantActive || added != wantAdded {
		t.Fatalf("VisitMany(%q, %q) = %d, added %d; want %d, added %d", name, keys, n, added, wantActive, wantAdded)
	}
}

// keyRange returns the keys prefix+"0" to prefix+(n-1).
func keyRange(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

func leave(t testing.TB, s participant.Store, name, key string, wantActive int, wantRemoved bool) {
	t.Helper()
	n, removed, err := s.Leave(context.Background(), name, key)
	if err != nil {
		t.Fatalf("Leave(%q, %q): %v", name, key, err)
	}
	if n != wantActive || removed != wantRemoved {
		t.Fatalf("Leave(%q, %q) = %d, removed %v; want %d, removed %v", name, key, n, removed, wantActive, wantRemoved)
	}
}

func wantActive(t testing.TB, s participant.Store, name string, timeout time.Duration, want int) {
	t.Helper()
	n, err := s.Active(context.Background(), name, timeout)
	if err != nil {
		t.Fatalf("Active(%q): %v", name, err)
	}
	if n != want {
		t.Fatalf("Active(%q, %v) = %d, want %d", name, timeout, n, want)
	}
}

const (
	bbsNow   = 1762615696 // the BBS specification's example time
	users    = "users"
	fiveMins = 300 * time.Second
)

// conformance lists the behaviour every Store must show.
var conformance = []struct {
	name string
	body func(t *testing.T, s participant.Store, c *clock)
}{
	{"a repeated visit is not counted twice", func(t *testing.T, s participant.Store, c *clock) {
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "a", fiveMins, 1, true)
		visit(t, s, users, "a", fiveMins, 1, false)
		c.Set(bbsNow + 10)
		visit(t, s, users, "b", fiveMins, 2, true)
		visit(t, s, users, "a", fiveMins, 2, false)
		wantActive(t, s, users, fiveMins, 2)
	}},
	{"an expired key is dropped and comes back as new", func(t *testing.T, s participant.Store, c *clock) {
		c.Set(1762615400)
		visit(t, s, users, "3789011499", fiveMins, 1, true)
		c.Set(1762615701) // 1762615400 + 300 < 1762615701: expired
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "2500871836", fiveMins, 1, true)
		visit(t, s, users, "3789011499", fiveMins, 2, true)
	}},
	{"leave", func(t *testing.T, s participant.Store, c *clock) {
		leave(t, s, users, "a", 0, false) // never seen: nothing to remove, count stays 0
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "a", fiveMins, 1, true)
		visit(t, s, users, "b", fiveMins, 2, true)
		leave(t, s, users, "never", 2, false)
		leave(t, s, users, "a", 1, true)
		leave(t, s, users, "a", 1, false)
		leave(t, s, users, "b", 0, true)
		leave(t, s, users, "b", 0, false)
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "a", fiveMins, 1, true) // a key that left is new again
	}},
	{"names and keys are independent byte strings", func(t *testing.T, s participant.Store, c *clock) {
		names := []string{"a", "A", "%41", participant.DefaultName, "vk.users", "a/b", ".", "..", "x}{y", "\x00\xff",
			strings.Repeat("/", participant.MaxNameLen)}
		keys := []string{"1", "A", "a", "{k}", "\x00", strings.Repeat("k", participant.MaxKeyLen)}
		for i, name := range names {
			for j := range i%len(keys) + 1 {
				visit(t, s, name, keys[j], fiveMins, j+1, true)
			}
		}
		for i, name := range names {
			wantActive(t, s, name, fiveMins, i%len(keys)+1)
		}
	}},
	{"a clock going back keeps expiry exact", func(t *testing.T, s participant.Store, c *clock) {
		c.Set(1000)
		visit(t, s, users, "a", 100*time.Second, 1, true)
		c.Set(900) // another instance's clock, behind
		visit(t, s, users, "b", 100*time.Second, 2, true)
		c.Set(1000)
		wantActive(t, s, users, 100*time.Second, 2) // b: 900 + 100 >= 1000
		c.Set(1001)
		wantActive(t, s, users, 100*time.Second, 1)
		visit(t, s, users, "c", 100*time.Second, 2, true) // drops b, keeps a
		wantActive(t, s, users, 100*time.Second, 2)
	}},
	{"invalid arguments are refused and change nothing", func(t *testing.T, s participant.Store, c *clock) {
		ctx := context.Background()
		visit(t, s, users, "a", fiveMins, 1, true)
		long := func(n int) string { return strings.Repeat("x", n+1) }
		tests := []struct {
			name, set, key string
			timeout        time.Duration
			want           error
		}{
			{"empty name", "", "k", fiveMins, participant.ErrInvalidName},
			{"long name", long(participant.MaxNameLen), "k", fiveMins, participant.ErrInvalidName},
			{"empty key", users, "", fiveMins, participant.ErrInvalidKey},
			{"long key", users, long(participant.MaxKeyLen), fiveMins, participant.ErrInvalidKey},
			{"negative timeout", users, "k", -time.Second, participant.ErrInvalidTimeout},
			{"sub-second timeout", users, "k", 500 * time.Millisecond, participant.ErrInvalidTimeout},
			{"timeout over the maximum", users, "k", participant.MaxTimeout + time.Second, participant.ErrInvalidTimeout},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if n, isNew, err := participant.Visit(ctx, s, tt.set, tt.key, tt.timeout); !errors.Is(err, tt.want) {
					t.Errorf("Visit = %d, %v, %v; want %v", n, isNew, err, tt.want)
				}
				if tt.want != participant.ErrInvalidTimeout {
					if n, removed, err := s.Leave(ctx, tt.set, tt.key); !errors.Is(err, tt.want) {
						t.Errorf("Leave = %d, %v, %v; want %v", n, removed, err, tt.want)
					}
				}
				if tt.want != participant.ErrInvalidKey {
					if n, err := s.Active(ctx, tt.set, tt.timeout); !errors.Is(err, tt.want) {
						t.Errorf("Active = %d, %v; want %v", n, err, tt.want)
					}
				}
			})
		}
		wantActive(t, s, users, fiveMins, 1)
		visit(t, s, users, "a", fiveMins, 1, false)
		wantActive(t, s, long(participant.MaxNameLen)[:participant.MaxNameLen], fiveMins, 0)
	}},
	{"cancelled context changes nothing", func(t *testing.T, s participant.Store, c *clock) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := participant.Visit(ctx, s, users, "a", fiveMins); !errors.Is(err, context.Canceled) {
			t.Fatalf("Visit error = %v, want context.Canceled", err)
		}
		wantActive(t, s, users, fiveMins, 0)
	}},
	{"100 concurrent visits of one new key: new exactly once", func(t *testing.T, s participant.Store, c *clock) {
		const n = 100
		news := together.Run(t, n, func(int) (bool, error) {
			active, isNew, err := participant.Visit(context.Background(), s, users, "k", fiveMins)
			if err == nil && active != 1 {
				err = fmt.Errorf("active = %d, want 1", active)
			}
			return isNew, err
		})
		if got := countTrue(news); got != 1 {
			t.Fatalf("%d visits reported new, want 1", got)
		}
		wantActive(t, s, users, fiveMins, 1)
	}},
	{"concurrent visits of distinct keys count 1 to n once each", func(t *testing.T, s participant.Store, c *clock) {
		const n = 200
		counts := together.Run(t, n, func(i int) (int, error) {
			count, isNew, err := participant.Visit(context.Background(), s, users, fmt.Sprint("user", i), fiveMins)
			if err == nil && !isNew {
				err = fmt.Errorf("user%d not new", i)
			}
			return count, err
		})
		slices.Sort(counts)
		for i, got := range counts {
			if got != i+1 {
				t.Fatalf("sorted counts[%d] = %d, want %d", i, got, i+1)
			}
		}
		wantActive(t, s, users, fiveMins, n)
	}},
	{"concurrent leaves remove once and never go negative", func(t *testing.T, s participant.Store, c *clock) {
		visit(t, s, users, "a", fiveMins, 1, true)
		visit(t, s, users, "b", fiveMins, 2, true)
		const n = 50
		removals := together.Run(t, n, func(int) (bool, error) {
			active, removed, err := s.Leave(context.Background(), users, "a")
			if err == nil && active != 1 {
				err = fmt.Errorf("active = %d, want 1", active)
			}
			return removed, err
		})
		if got := countTrue(removals); got != 1 {
			t.Fatalf("%d leaves reported removed, want 1", got)
		}
		wantActive(t, s, users, fiveMins, 1)
	}},
	{"VisitMany counts each key not active before once", func(t *testing.T, s participant.Store, c *clock) {
		visitMany(t, s, users, []string{"a", "b", "c"}, fiveMins, 3, 3)
		visitMany(t, s, users, []string{"a", "d", "d"}, fiveMins, 4, 1)
		visitMany(t, s, users, []string{"c", "b", "a", "b"}, fiveMins, 4, 0)
		wantActive(t, s, users, fiveMins, 4)
		visit(t, s, users, "d", fiveMins, 4, false)
		visit(t, s, users, "e", fiveMins, 5, true)
		leave(t, s, users, "a", 4, true)
		visitMany(t, s, users, []string{"a", "e"}, fiveMins, 5, 1) // a key that left is new again
	}},
	{"VisitMany counts revisited expired keys as new and drops the rest", func(t *testing.T, s participant.Store, c *clock) {
		c.Set(1000)
		visitMany(t, s, users, []string{"a", "b", "c"}, 100*time.Second, 3, 3)
		c.Set(1050)
		visitMany(t, s, users, []string{"d"}, 100*time.Second, 4, 1)
		c.Set(1101) // a, b, c expired; d active
		visitMany(t, s, users, []string{"a", "b", "d", "a"}, 100*time.Second, 3, 2)
		wantActive(t, s, users, 100*time.Second, 3)
		visit(t, s, users, "c", 100*time.Second, 4, true)
	}},
	{"VisitMany takes MaxBatch keys in one call", func(t *testing.T, s participant.Store, c *clock) {
		keys := keyRange("user", participant.MaxBatch)
		visitMany(t, s, users, keys, fiveMins, participant.MaxBatch, participant.MaxBatch)
		visitMany(t, s, users, append(keys[1:], "new"), fiveMins, participant.MaxBatch+1, 1)
		wantActive(t, s, users, fiveMins, participant.MaxBatch+1)
		leave(t, s, users, keys[0], participant.MaxBatch, true)
		leave(t, s, users, keys[participant.MaxBatch-1], participant.MaxBatch-1, true)
	}},
	{"VisitMany refuses invalid arguments and changes nothing", func(t *testing.T, s participant.Store, c *clock) {
		ctx := context.Background()
		visit(t, s, users, "a", fiveMins, 1, true)
		long := func(n int) string { return strings.Repeat("x", n+1) }
		tests := []struct {
			name, set string
			keys      []string
			timeout   time.Duration
			want      error
		}{
			{"nil keys", users, nil, fiveMins, participant.ErrInvalidKey},
			{"no keys", users, []string{}, fiveMins, participant.ErrInvalidKey},
			{"more than MaxBatch keys", users, keyRange("k", participant.MaxBatch+1), fiveMins, participant.ErrInvalidKey},
			{"an empty key among good ones", users, []string{"b", "", "c"}, fiveMins, participant.ErrInvalidKey},
			{"a long key last", users, []string{"b", "c", long(participant.MaxKeyLen)}, fiveMins, participant.ErrInvalidKey},
			{"empty name", "", []string{"b"}, fiveMins, participant.ErrInvalidName},
			{"long name", long(participant.MaxNameLen), []string{"b"}, fiveMins, participant.ErrInvalidName},
			{"negative timeout", users, []string{"b", "c"}, -time.Second, participant.ErrInvalidTimeout},
			{"sub-second timeout", users, []string{"b"}, 500 * time.Millisecond, participant.ErrInvalidTimeout},
			{"timeout over the maximum", users, []string{"b"}, participant.MaxTimeout + time.Second, participant.ErrInvalidTimeout},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if n, added, err := s.VisitMany(ctx, tt.set, tt.keys, tt.timeout); !errors.Is(err, tt.want) {
					t.Errorf("VisitMany = %d, %d, %v; want %v", n, added, err, tt.want)
				}
			})
		}
		wantActive(t, s, users, fiveMins, 1)
		visitMany(t, s, users, []string{"a", "b", "c"}, fiveMins, 3, 2)
		wantActive(t, s, long(participant.MaxNameLen)[:participant.MaxNameLen], fiveMins, 0)
	}},
	{"VisitMany with a cancelled context changes nothing", func(t *testing.T, s participant.Store, c *clock) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := s.VisitMany(ctx, users, []string{"a", "b"}, fiveMins); !errors.Is(err, context.Canceled) {
			t.Fatalf("VisitMany error = %v, want context.Canceled", err)
		}
		wantActive(t, s, users, fiveMins, 0)
	}},
	{"50 concurrent VisitMany of the same 20 keys add 20 in all", func(t *testing.T, s participant.Store, c *clock) {
		const n, batch = 50, 20
		keys := keyRange("user", batch)
		added := together.Run(t, n, func(int) (int, error) {
			active, added, err := s.VisitMany(context.Background(), users, keys, fiveMins)
			if err == nil && active != batch {
				err = fmt.Errorf("active = %d, want %d", active, batch)
			}
			return added, err
		})
		if got := sumInts(added); got != batch {
			t.Fatalf("the calls added %d keys in all, want %d", got, batch)
		}
		wantActive(t, s, users, fiveMins, batch)
	}},
}

func TestConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		for _, cc := range conformance {
			t.Run(cc.name, func(t *testing.T) {
				c := newClock(bbsNow)
				cc.body(t, open(t, c.Now), c)
			})
		}
	})
}

// TestExpiry checks the activity rule last_seen + timeout >= now at and
// around its boundary, for every store.
func TestExpiry(t *testing.T) {
	tests := []struct {
		name     string
		seen     int64
		now      int64
		timeout  time.Duration
		isActive bool
	}{
		// The BBS specification calls this entry expired, but
		// 1762615400 + 300 = 1762615700 >= 1762615696: by its own rule
		// the entry, 296 s old, is active; it expires at 1762615701.
		{"the BBS example's entry is 296 s old: active", 1762615400, 1762615696, fiveMins, true},
		{"the BBS example's entry at its boundary", 1762615400, 1762615700, fiveMins, true},
		{"the BBS example's entry expired", 1762615400, 1762615701, fiveMins, false},
		{"inside the timeout", bbsNow - 299, bbsNow, fiveMins, true},
		{"last_seen + timeout == now is active", bbsNow - 300, bbsNow, fiveMins, true},
		{"one second past", bbsNow - 301, bbsNow, fiveMins, false},
		{"default timeout boundary", bbsNow - 300, bbsNow, 0, true},
		{"default timeout past", bbsNow - 301, bbsNow, 0, false},
		{"one-second timeout boundary", bbsNow - 1, bbsNow, time.Second, true},
		{"one-second timeout past", bbsNow - 2, bbsNow, time.Second, false},
		{"fractions of a second are dropped", bbsNow - 1, bbsNow, 1999 * time.Millisecond, true},
		{"fractions of a second are dropped, past", bbsNow - 2, bbsNow, 1999 * time.Millisecond, false},
	}
	forEachStore(t, func(t *testing.T, open opener) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := newClock(tt.seen)
				s := open(t, c.Now)
				visit(t, s, users, "k", tt.timeout, 1, true)
				c.Set(tt.now)
				want := 0
				if tt.isActive {
					want = 1
				}
				wantActive(t, s, users, tt.timeout, want)
				visit(t, s, users, "other", tt.timeout, want+1, true)
				visit(t, s, users, "k", tt.timeout, 2, !tt.isActive)
			})
		}
	})
}

// TestVisitManyKeyError checks that a bad key in a batch is named by its
// index, while Visit's error for one key reads as it always has.
func TestVisitManyKeyError(t *testing.T) {
	ctx := context.Background()
	s := participant.NewMemory(nil, participant.MemoryLimits{})
	_, _, err := participant.Visit(ctx, s, users, "", fiveMins)
	if want := "participant: invalid key: length 0, want 1 to 255 bytes"; err == nil || err.Error() != want {
		t.Errorf("Visit error = %v, want %q", err, want)
	}
	_, _, err = s.VisitMany(ctx, users, []string{"a", "b", ""}, fiveMins)
	if want := "keys[2]: participant: invalid key: length 0, want 1 to 255 bytes"; err == nil || err.Error() != want {
		t.Errorf("VisitMany error = %v, want %q", err, want)
	}
	_, _, err = s.VisitMany(ctx, users, nil, fiveMins)
	if want := "participant: invalid key: a batch of 0 keys, want 1 to 10000"; err == nil || err.Error() != want {
		t.Errorf("VisitMany error = %v, want %q", err, want)
	}
}

func TestIPKey(t *testing.T) {
	tests := []struct{ ip, want string }{
		{"192.168.1.1", "1727004492"}, // md5 66efff4c…
		{"127.0.0.1", "4113069645"},   // md5 f528764d…
		{"0.0.0.0", "4059134260"},     // the BBS's fallback address
		{"::1", "2206123381"},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			if got := participant.IPKey(tt.ip); got != tt.want {
				t.Fatalf("IPKey(%q) = %s, want %s", tt.ip, got, tt.want)
			}
		})
	}
}

func TestNameLimitMatchesAccess(t *testing.T) {
	if participant.MaxNameLen != access.MaxNameLen {
		t.Fatalf("participant.MaxNameLen = %d, access.MaxNameLen = %d: one name rule must hold on the counter port",
			participant.MaxNameLen, access.MaxNameLen)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// newRedis returns a Redis store on rdb under prefix.
func newRedis(tb testing.TB, rdb redis.UniversalClient, prefix string) *participant.Redis {
	tb.Helper()
	s, err := participant.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestKeyCap checks the cap on keys per name in every store: a visit that
// would leave a name with more keys is refused with ErrTooManyKeys and
// changes nothing, visits of the keys held go on, and expired keys make
// room (a visit that drops as many as it adds passes).
func TestKeyCap(t *testing.T) {
	forEachStore(t, func(t *testing.T, open opener) {
		c := newClock(bbsNow)
		s := open(t, c.Now)
		kc := &participant.KeyCap{Max: 3, Setting: "COUNTERS_PARTICIPANT_MAX_KEYS"}
		s.(interface{ SetMaxKeys(*participant.KeyCap) }).SetMaxKeys(kc)
		refused := func(keys ...string) {
			t.Helper()
			_, _, err := s.VisitMany(context.Background(), users, keys, fiveMins)
			if !errors.Is(err, participant.ErrTooManyKeys) || !strings.Contains(err.Error(), "COUNTERS_PARTICIPANT_MAX_KEYS") {
				t.Fatalf("visit of %q past the cap: %v, want ErrTooManyKeys naming the setting", keys, err)
			}
		}
		refused("a", "b", "c", "d") // a new name past the cap
		wantActive(t, s, users, fiveMins, 0)
		visit(t, s, users, "a", fiveMins, 1, true)
		c.Set(bbsNow + 10)
		visitMany(t, s, users, []string{"b", "c", "b"}, fiveMins, 3, 2)
		refused("d")
		refused("a", "d")
		wantActive(t, s, users, fiveMins, 3)
		visit(t, s, users, "a", fiveMins, 3, false) // held: no growth
		c.Set(bbsNow + 10 + 301)                    // b and c expired, a (seen at +10) too
		visitMany(t, s, users, []string{"d", "e", "f"}, fiveMins, 3, 3)
		if got := kc.Refusals(); got != 3 {
			t.Errorf("%d refusals counted, want 3", got)
		}
	})
}
