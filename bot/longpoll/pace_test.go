package longpoll_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// These tests run the poller on synctest's clock against scriptedVK, an
// in-process VK answering each long-poll request with the next answer of
// a script, so that a backoff is measured exactly, not on the machine's
// speed.

// A call is one request the poller made, at the bubble's time.
type call struct {
	at     time.Time
	method string // "groups.getLongPollServer" or "a_check"
	ts     string // a_check's ts
}

// scriptedVK is an http.RoundTripper standing in for VK: the methods API
// (groups.getLongPollServer, answering key "k" and ts "10") and a
// long-poll server answering the script in order; once the script is
// spent, a request waits until it is cancelled.
type scriptedVK struct {
	mu     sync.Mutex // guards script and calls
	script []string   // each: an HTTP status and a body, "200 {...}"
	calls  []call
}

func (s *scriptedVK) RoundTrip(r *http.Request) (*http.Response, error) {
	answer := func(status int, body string) (*http.Response, error) {
		return &http.Response{StatusCode: status, Status: http.StatusText(status),
			Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
			Body:   io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	s.mu.Lock()
	if strings.HasSuffix(r.URL.Path, "/groups.getLongPollServer") {
		s.calls = append(s.calls, call{at: time.Now(), method: "groups.getLongPollServer"})
		s.mu.Unlock()
		return answer(200, `{"response":{"key":"k","server":"http://lp.test/lp","ts":"10"}}`)
	}
	s.calls = append(s.calls, call{at: time.Now(), method: "a_check", ts: r.URL.Query().Get("ts")})
	if len(s.script) == 0 {
		s.mu.Unlock()
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	next := s.script[0]
	s.script = s.script[1:]
	s.mu.Unlock()
	status, body, _ := strings.Cut(next, " ")
	if status != "200" {
		return answer(502, "<html>bad gateway</html>")
	}
	return answer(200, body)
}

func (s *scriptedVK) log() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// memStore is a Store in memory: the lease is always this poller's.
type memStore struct {
	mu sync.Mutex
	ts string
}

func (m *memStore) Hold(context.Context, int, string, time.Duration) (bool, error) { return true, nil }
func (m *memStore) Release(context.Context, int, string) error                     { return nil }
func (m *memStore) TS(context.Context, int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ts, nil
}
func (m *memStore) SaveTS(_ context.Context, _ int, _, ts string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ts = ts
	return true, nil
}

const (
	paceBase = 200 * time.Millisecond
	paceMax  = 30 * time.Second
)

// runScript runs a poller against script until the script is spent and
// every request since waits, plus the time to spend it, and returns the
// requests it made and the messages it handled.
func runScript(t *testing.T, script ...string) ([]call, int) {
	t.Helper()
	vk := &scriptedVK{script: script}
	api := vkapi.New("tok", vkapi.Options{MethodURL: "http://vk.test/method/"})
	api.Client = &http.Client{Transport: vk}
	var handled int
	var mu sync.Mutex
	h := callback.MessageHandlerFunc(func(context.Context, callback.Message) error {
		mu.Lock()
		defer mu.Unlock()
		handled++
		return nil
	})
	p, err := longpoll.New(longpoll.Options{GroupID: group, API: api, Handler: h, Store: &memStore{},
		Client: &http.Client{Transport: vk}, Wait: 25 * time.Second, RetryBase: paceBase, RetryMax: paceMax, Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for deadline := time.Now().Add(24 * time.Hour); ; {
		synctest.Wait() // every goroutine of the poller waits: on a timer or on the spent script
		vk.mu.Lock()
		left := len(vk.script)
		vk.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("%d answers of the script still unasked after a day", left)
		}
		time.Sleep(paceBase / 2)
	}
	time.Sleep(time.Hour) // whatever the poller would still do after the script
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return vk.log(), handled
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func only(calls []call, method string) []call {
	var out []call
	for _, c := range calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// TestRepeatedFailedIsPaced: 40 "failed: 2" in a row (VK expiring every
// key at once) give 40 groups.getLongPollServer calls, the first at once
// and the others further and further apart, up to RetryMax: not 40 calls
// at VK's speed. A batch handled ends the run: the next failed 2 is acted
// on at once again.
func TestRepeatedFailedIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := append(repeat(`200 {"failed":2}`, 40), `200 {"ts":"11","updates":[]}`, `200 {"failed":2}`)
		calls, _ := runScript(t, script...)
		servers := only(calls, "groups.getLongPollServer")
		if len(servers) != 1+40+1 {
			t.Fatalf("%d groups.getLongPollServer calls, want 42: one to start, one per failed 2", len(servers))
		}
		start := servers[0].at
		var perSecond [1 << 12]int
		for i, c := range servers[1:41] {
			perSecond[int(c.at.Sub(start)/time.Second)]++
			if i == 0 {
				if gap := c.at.Sub(start); gap != 0 {
					t.Errorf("the first failed 2 waited %v before a new key, want none", gap)
				}
				continue
			}
			want := min(paceBase<<min(i-1, 20), paceMax)
			if gap := c.at.Sub(servers[i].at); gap != want {
				t.Errorf("failed 2 #%d in a row: new key %v after the one before, want %v", i+1, gap, want)
			}
		}
		if most := max(perSecond[0], perSecond[1]); most > 4 {
			t.Errorf("%d groups.getLongPollServer calls in one second", most)
		}
		took := servers[40].at.Sub(start)
		t.Logf("40 failed 2 in a row: 40 calls over %v (at most %d in a second)", took, max(perSecond[0], perSecond[1]))
		checks := only(calls, "a_check")
		success := checks[41] // the answer with ts 11
		if gap := servers[41].at.Sub(success.at); gap != 0 {
			t.Errorf("a failed 2 after a handled batch waited %v, want none", gap)
		}
	})
}

// TestFailedAnswerResetsTheBackoff: seven failed requests in a row grow
// the backoff to 12.8 s; a failed 1 VK then answers shows the transport
// works, so the next failed request is retried after RetryBase, not
// 25.6 s later.
func TestFailedAnswerResetsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := append(repeat("502", 7), `200 {"failed":1,"ts":"10"}`, "502")
		calls, _ := runScript(t, script...)
		checks := only(calls, "a_check")
		if len(checks) != 10 {
			t.Fatalf("%d long-poll requests, want 10", len(checks))
		}
		for i := 1; i < 7; i++ {
			if gap, want := checks[i].at.Sub(checks[i-1].at), paceBase<<(i-1); gap != want {
				t.Errorf("failed request #%d: retried after %v, want %v", i, gap, want)
			}
		}
		if gap := checks[8].at.Sub(checks[7].at); gap != 0 {
			t.Errorf("failed 1 after failed requests: acted on after %v, want at once", gap)
		}
		if gap := checks[9].at.Sub(checks[8].at); gap != paceBase {
			t.Errorf("a failed request after a failed 1: retried after %v, want %v (the backoff begins again)", gap, paceBase)
		}
	})
}

// TestMalformedTSIsRefused: an answer whose ts is not an event number (an
// object, an array, a boolean, a fraction, text) is refused as a failed
// request: its events are not handled, and the ts sent next is still the
// one held, never the malformed one.
func TestMalformedTSIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		event := `{"type":"message_new","group_id":77,"event_id":"e1","v":"5.199","object":{"message":{"id":1,"peer_id":5,"from_id":5,"text":"hi"}}}`
		var script []string
		for _, ts := range []string{`{"n":11}`, `["11"]`, `true`, `11.5`, `"11a"`, `"-1"`, `""`} {
			script = append(script, `200 {"ts":`+ts+`,"updates":[`+event+`]}`)
		}
		script = append(script, `200 {"ts":11,"updates":[`+event+`]}`)
		calls, handled := runScript(t, script...)
		checks := only(calls, "a_check")
		if len(checks) != len(script)+1 {
			t.Fatalf("%d long-poll requests, want %d", len(checks), len(script)+1)
		}
		for i, c := range checks[:len(script)] {
			if c.ts != "10" {
				t.Errorf("request #%d asked for ts %q, want the ts held, 10", i+1, c.ts)
			}
		}
		if last := checks[len(script)].ts; last != "11" || handled != 1 {
			t.Errorf("after a well-formed ts 11: next ts %q, %d messages handled; want 11 and 1", last, handled)
		}
	})
}
