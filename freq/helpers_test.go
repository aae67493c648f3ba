package freq_test

import (
	"context"
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
// which are deleted when t ends (on a cluster, told it is one).
func newStore(t testing.TB, tg *redistest.Target, opts freq.Options) *freq.Store {
	t.Helper()
	prefix := redistest.Prefix(t)
	opts.Prefix = prefix
	opts.Cluster = opts.Cluster || tg.Kind == redistest.Cluster
	t.Cleanup(func() {
		// One DEL per key: a multi-key DEL would cross slots on a cluster.
		for _, k := range redistest.Keys(t, tg.Client, prefix) {
			tg.Client.Del(context.Background(), k)
		}
	})
	return mustNew(t, tg.Client, opts)
}

// mustNew is freq.New for options the test knows are valid.
func mustNew(t testing.TB, rdb redis.UniversalClient, opts freq.Options) *freq.Store {
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

// state is what Redis holds for one identity, written out as a run-length
// list ("sec" or "sec:n", oldest first) and the total.
type state struct {
	List  []string
	Total string // "" when the key does not exist
}

// stateOf reads where identity is, its bucket's field or its text key
// (never both), and writes it out as a state.
func stateOf(t testing.TB, tg *redistest.Target, s *freq.Store, identity string) state {
	t.Helper()
	ctx := context.Background()
	keys := s.Keys(identity)
	k := keys[0]
	typ, err := tg.Client.Type(ctx, k).Result()
	if err != nil {
		t.Fatalf("TYPE: %v", err)
	}
	v, ferr := tg.Client.HGet(ctx, keys[3], s.Field(identity)).Result()
	if ferr == nil && typ != "none" {
		t.Fatalf("%q is in its bucket (%s) and has a %s key", identity, v, typ)
	}
	switch typ {
	case "none":
		if ferr == redis.Nil {
			return state{}
		}
		if _, perr := strconv.ParseInt(v, 10, 64); ferr != nil || perr != nil {
			t.Fatalf("HGET %q: %q, %v", keys[3], v, ferr)
		}
		return state{List: []string{v}, Total: "1"}
	case "list":
	default:
		t.Fatalf("text key is a %s", typ)
	}
	l, err := tg.Client.LRange(ctx, k, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	n := make([]int64, len(l))
	for i, e := range l {
		if n[i], err = strconv.ParseInt(e, 10, 64); err != nil || len(l) < 3 {
			t.Fatalf("list %v: entry %d is not an integer", l, i)
		}
	}
	secs, counts := []int64{n[2]}, []int64{1}
	for i, v := range n[3:] {
		switch {
		case v < 0:
			counts[len(counts)-1] -= v
		case v > 0:
			secs, counts = append(secs, secs[len(secs)-1]+v), append(counts, 1)
		default:
			t.Fatalf("list %v: entry %d is 0", l, i+3)
		}
	}
	if tail := secs[len(secs)-1]; tail != n[1] {
		t.Fatalf("list %v: tail %d, the steps end at %d", l, n[1], tail)
	}
	st := state{Total: l[0]}
	for i, sec := range secs {
		e := strconv.FormatInt(sec, 10)
		if counts[i] > 1 {
			e += ":" + strconv.FormatInt(counts[i], 10)
		}
		st.List = append(st.List, e)
	}
	if got := sumList(t, st.List); strconv.FormatInt(got, 10) != st.Total {
		t.Fatalf("list %v: total %s, the entries hold %d", l, st.Total, got)
	}
	return st
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
