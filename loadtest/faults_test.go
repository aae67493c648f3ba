package loadtest_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/loadtest"
)

func faultString(faults []loadtest.Fault) string {
	s := make([]string, len(faults))
	for i, f := range faults {
		s[i] = f.String()
	}
	return strings.Join(s, ",")
}

func TestParseFaults(t *testing.T) {
	good := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"one", "redis-stall@2s+10s", "redis-stall@2s+10s"},
		{"sorted by start, spaces", " vk-down@5s+12s , redis-latency@1s+5s=50ms", "redis-latency@1s+5s=50ms,vk-down@5s+12s"},
		{"default code", "vk-error@0s+1s", "vk-error@0s+1s=10"},
		{"code", "vk-error@0s+1s=6", "vk-error@0s+1s=6"},
		{"default flood", "vk-flood@1s+2s", "vk-flood@1s+2s=1"},
		{"flood count", "vk-flood@1.5s+500ms=3", "vk-flood@1.5s+500ms=3"},
		{"back to back on one switch", "redis-cut@1s+1s,redis-stall@0s+1s", "redis-stall@0s+1s,redis-cut@1s+1s"},
		{"other switches overlap", "redis-stall@0s+5s,redis-latency@1s+1s=1ms,vk-hang@1s+1s,vk-flood@1s+1s", "redis-stall@0s+5s,redis-latency@1s+1s=1ms,vk-hang@1s+1s,vk-flood@1s+1s=1"},
		{"502", "vk-502@0s+1s", "vk-502@0s+1s"},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			faults, err := loadtest.ParseFaults(tc.in)
			if err != nil || faultString(faults) != tc.want {
				t.Fatalf("%q: %q, %v; want %q", tc.in, faultString(faults), err, tc.want)
			}
			again, err := loadtest.ParseFaults(faultString(faults))
			if err != nil || faultString(again) != tc.want {
				t.Errorf("String does not parse back: %q, %v", faultString(again), err)
			}
		})
	}
	bad := []struct{ name, in, want string }{
		{"no at", "redis-stall", "KIND@START"},
		{"empty item", "vk-down@1s+1s,", "KIND@START"},
		{"unknown kind", "redis-melt@1s+1s", "unknown kind"},
		{"no duration", "vk-down@1s", "START+DURATION"},
		{"bad start", "vk-down@soon+1s", "start"},
		{"negative start", "vk-down@-1s+1s", "start"},
		{"zero duration", "vk-down@1s+0s", "duration"},
		{"value not taken", "redis-stall@1s+1s=5ms", "no =VALUE"},
		{"latency missing", "redis-latency@1s+1s", "needs =VALUE"},
		{"latency bad", "redis-latency@1s+1s=fast", "latency"},
		{"latency huge", "redis-latency@1s+1s=1m", "latency"},
		{"code bad", "vk-error@1s+1s=-3", "error code"},
		{"flood zero", "vk-flood@1s+1s=0", "conversations"},
		{"too late", "vk-down@1h+1s", "within"},
		{"overlap", "redis-stall@1s+5s,redis-cut@3s+1s", "overlap"},
		{"overlap vk", "vk-error@2s+1s,vk-down@1s+5s", "overlap"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			faults, err := loadtest.ParseFaults(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q: %v, %v; want an error about %s", tc.in, faults, err, tc.want)
			}
		})
	}
}

func mustFaults(t *testing.T, s string) []loadtest.Fault {
	t.Helper()
	f, err := loadtest.ParseFaults(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFaultScheduleAgainstCorrectBot runs a bot that counts in Redis
// through the run's proxy and retries its sends until VK accepts them,
// under flood control, a Redis stall and a VK outage: every fault is
// applied at its time and ended, each is felt, and every answer is right.
// The outage begins before the stall ends and lasts 500 ms past it: the
// messages the stall held are sent once it ends, into the outage, however
// late a loaded machine posts or counts them (an outage set on the posting
// schedule alone missed every send at load).
func TestFaultScheduleAgainstCorrectBot(t *testing.T) {
	m := miniredis.RunT(t)
	proxy, err := faultproxy.New(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// No read timeout: a stalled count waits for Redis, so it is never
	// run twice.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ReadTimeout: -1})
	defer rdb.Close()

	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	if b.store, err = freq.New(rdb, freq.Options{Window: time.Hour, Prefix: "t:"}); err != nil {
		t.Fatal(err)
	}
	b.patient, b.quietRetries = true, true
	o := options(u, vk)
	o.Texts, o.PerText, o.Concurrency, o.Rate = 4, 10, 4, 100
	o.RetryFraction = 0.1
	o.Faults = mustFaults(t, "vk-flood@50ms+300ms,redis-stall@100ms+400ms,vk-down@400ms+600ms")
	o.RedisProxy = proxy
	rep := run(t, o)
	if got := problems(rep); len(got) != 0 {
		t.Fatalf("problems %v: %v", got, rep.Check.Listed)
	}
	if len(rep.Faults) != 3 {
		t.Fatalf("faults %+v", rep.Faults)
	}
	for i, f := range o.Faults {
		r := rep.Faults[i]
		if r.Fault != f.String() || r.Began < f.At || r.Ended < f.End() {
			t.Errorf("fault %s applied as %+v", f, r)
		}
	}
	if vk.Calls("messages.send") <= len(vk.Sends()) {
		t.Errorf("%d send calls, %d accepted: the VK faults failed none", vk.Calls("messages.send"), len(vk.Sends()))
	}
	if rep.Latency[0].Max < 200*time.Millisecond {
		t.Errorf("slowest webhook answer %v: the Redis stall held none", rep.Latency[0].Max)
	}
	flooded := map[int]bool{}
	detail, ok := strings.CutPrefix(rep.Faults[0].Detail, "peers ")
	if !ok {
		t.Fatalf("flood detail %q", rep.Faults[0].Detail)
	}
	for _, p := range strings.Fields(detail) {
		n, _ := strconv.Atoi(p)
		flooded[n] = true
	}
	floodBegin, floodEnd := rep.Started.Add(rep.Faults[0].Began), rep.Started.Add(rep.Faults[0].Ended)
	for _, s := range vk.Sends() {
		if flooded[s.PeerID] && !s.At.Before(floodBegin) && s.At.Before(floodEnd) {
			t.Errorf("a send to flooded peer %d was accepted during the flood", s.PeerID)
		}
	}
	if !strings.Contains(rep.Scenario, "faults vk-flood@50ms+300ms=1,redis-stall@100ms+400ms,vk-down@400ms+600ms,") {
		t.Errorf("scenario %q does not list the faults", rep.Scenario)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "fault redis-stall@100ms+400ms: ") {
		t.Errorf("the table does not list the faults:\n%s", table.String())
	}
	var page strings.Builder
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `class="fault"`); n != 3 || !strings.Contains(page.String(), "<li><code>vk-down@400ms") {
		t.Errorf("the page shades %d faults, want 3, or does not list them", n)
	}
}

// TestStrictSendsCatchesRepeatedSend: a bot that sends its reply again
// for a re-delivered event passes the lenient check and fails the strict
// one.
func TestStrictSendsCatchesRepeatedSend(t *testing.T) {
	vk := newVK(t)
	_, u := newFakeBot(t, vk)
	o := options(u, vk)
	o.RetryFraction, o.StrictSends = 0.2, true
	rep := run(t, o)
	want := map[loadtest.ProblemKind]int64{loadtest.RepeatedSend: 6}
	if got := problems(rep); len(got) != 1 || got[loadtest.RepeatedSend] != want[loadtest.RepeatedSend] {
		t.Fatalf("problems %v, want %v; listed %v", got, want, rep.Check.Listed)
	}
}

// TestRetryAfterIsHonoured: a refused event is posted again only after the
// Retry-After it was given.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel() // mostly waits (out a Retry-After): alongside the other waiting tests
	vk := newVK(t)
	b, u := newFakeBot(t, vk)
	b.retryAfter = "1"
	refused := false
	b.fault = func(k int, m callback.Message, n int64, r []reply) (int, []reply) {
		if k == 0 && !refused {
			refused = true
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, r
	}
	o := options(u, vk)
	o.Texts, o.PerText = 1, 1
	rep := run(t, o)
	if !rep.OK() || rep.Requests != 2 {
		t.Fatalf("requests %d, problems %v", rep.Requests, problems(rep))
	}
	if rep.Elapsed < time.Second {
		t.Errorf("the refused event was posted again after %v, before its Retry-After of 1s", rep.Elapsed)
	}
}

func TestRedisFaultNeedsProxy(t *testing.T) {
	vk := newVK(t)
	o := options("http://127.0.0.1:1/callback", vk)
	o.Faults = mustFaults(t, "redis-stall@1s+1s")
	if _, err := loadtest.RunCallback(context.Background(), o); err == nil || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("error %v, want one about the missing proxy", err)
	}
}

// TestEventsWithoutEventID: re-delivered messages without an event_id
// must be recognised by the message's identity; a bot that goes by
// event_id alone counts them again, and the checker says so.
func TestEventsWithoutEventID(t *testing.T) {
	for _, byID := range []bool{false, true} {
		t.Run("event_id only "+strconv.FormatBool(byID), func(t *testing.T) {
			vk := newVK(t)
			b, u := newFakeBot(t, vk)
			b.eventIDOnly, b.quietRetries = byID, true
			o := options(u, vk)
			o.RetryFraction, o.NoEventID, o.StrictSends = 0.2, 0.5, true
			rep := run(t, o)
			if !strings.Contains(rep.Scenario, "50% without event_id") {
				t.Errorf("scenario %q", rep.Scenario)
			}
			got := problems(rep)
			if !byID {
				if len(got) != 0 {
					t.Fatalf("problems %v: %v", got, rep.Check.Listed)
				}
				return
			}
			// Events 9, 19 and 29 are re-posted and bare (4, 14 and 24
			// carry an event_id): each is counted again as a new message,
			// so a second reply quoting it, under a random_id of its own,
			// is delivered too.
			if got[loadtest.Duplicate] != 3 {
				t.Fatalf("problems %v, want the recounted bare events caught; listed %v", got, rep.Check.Listed)
			}
			recounted := 0
			for _, p := range rep.Check.Listed {
				if p.Kind != loadtest.Duplicate {
					continue
				}
				recounted++
				id := strings.Fields(p.Subject)[1] // "event ID (text …"
				if seq, _ := strconv.ParseInt(id[len(id)-8:], 16, 0); seq%10 != 9 {
					t.Errorf("%s: not one of the bare re-posted events", p)
				}
			}
			if recounted != 3 {
				t.Errorf("%d events delivered twice, want 3; listed %v", recounted, rep.Check.Listed)
			}
		})
	}
}
