package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/together"
)

func TestSeedSequenceAndIndependentTexts(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		const n = 10
		for i := range n {
			a.MustOK(t, event(fmt.Sprintf("a%d", i), 1000, i+1, "hello"))
			a.MustOK(t, event(fmt.Sprintf("b%d", i), 2000, i+1, "другой текст"))
		}
		want := map[int][]string{}
		for i := range n {
			want[1000] = append(want[1000], strconv.Itoa(i))
			want[2000] = append(want[2000], strconv.Itoa(i))
		}
		got := map[int][]string{}
		for _, s := range a.WaitSends(t, 2*n) {
			got[s.PeerID] = append(got[s.PeerID], s.Message)
		}
		for peer := range want {
			if strings.Join(got[peer], ",") != strings.Join(want[peer], ",") {
				t.Errorf("peer %d got %v, want %v", peer, got[peer], want[peer])
			}
		}
	})
}

func TestConcurrentSameText(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		const n = 200
		together.Run(t, n, func(i int) (struct{}, error) {
			// A 503 (WEBHOOK_TIMEOUT passed on a starved machine) is
			// delivered again, as VK does: still counted once.
			for attempt := 1; ; attempt++ {
				resp, err := http.Post(a.URL("/callback"), "application/json", bytes.NewReader(event(fmt.Sprintf("c%d", i), 5000+i, 1, "burst")))
				if err != nil {
					return struct{}{}, err
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200 && string(body) == "ok":
					return struct{}{}, nil
				case resp.StatusCode != http.StatusServiceUnavailable || attempt == 5:
					return struct{}{}, fmt.Errorf("event %d, attempt %d: %d %s", i, attempt, resp.StatusCode, body)
				}
			}
		})
		var answers []int
		for _, s := range a.WaitSends(t, n) {
			v, _ := strconv.Atoi(s.Message)
			answers = append(answers, v)
		}
		sort.Ints(answers)
		for i, v := range answers {
			if v != i {
				t.Fatalf("answers %v, want exactly 0..%d each once", answers, n-1)
			}
		}
	})
}

func TestRetriedEventCountedOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		ev := event("retry-me", 77, 3, "once")
		a.MustOK(t, ev)
		if code, body, _ := a.Post(t, ev, map[string]string{"X-Retry-Counter": "1"}); code != 200 || body != "ok" {
			t.Fatalf("retry answered %d %q", code, body)
		}
		a.MustOK(t, event("next", 77, 4, "once"))
		sends := a.WaitSends(t, 2)
		byCMID := map[int64]string{}
		for _, s := range sends {
			byCMID[s.RandomID] = s.Message
		}
		if len(byCMID) != 2 || sends[0].Message != "0" || sends[1].Message != "1" {
			t.Errorf("replies %+v, want 0 to the first message (once, the retry not answered again) and 1 to the next", sends)
		}
	})
}

// TestBadInputChangesNothing posts every bad input of SPEC §1.2 and checks
// its status and that no key was written.
func TestBadInputChangesNothing(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, map[string]string{"MAX_BODY_BYTES": "4096"})
		before := redistest.Keys(t, tg.Client, a.Prefix) // the outbox stream exists from the start
		good := event("bad-1", 1, 1, "x")
		withSecret := func(s string) []byte { return bytes.Replace(good, []byte(testSecret), []byte(s), 1) }
		tests := []struct {
			name   string
			method string
			body   []byte
			status int
		}{
			{"wrong secret", "POST", withSecret("Vk7qR2xLmP9sT4wX"), 403},
			{"no secret", "POST", withSecret(""), 403},
			{"unknown group", "POST", bytes.Replace(good, []byte(strconv.Itoa(testGroup)), []byte("999"), 1), 403},
			{"malformed JSON", "POST", []byte(`{"type":"message_new",`), 400},
			{"body over the limit", "POST", event("bad-2", 1, 1, strings.Repeat("x", 5000)), 413},
			{"GET", "GET", nil, 405},
			{"peer_id of the wrong type", "POST", bytes.Replace(good, []byte(`"peer_id":1`), []byte(`"peer_id":"one"`), 1), 400},
		}
		for _, tc := range tests {
			req, _ := http.NewRequest(tc.method, a.URL("/callback"), bytes.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
			}
		}
		if keys := redistest.Keys(t, tg.Client, a.Prefix); len(keys) != len(before) {
			t.Errorf("bad input wrote keys: %v, before %v", keys, before)
		}
		if n, err := a.bot.outbox.Len(context.Background(), 7); err != nil || n != 0 {
			t.Errorf("outbox after bad input: %d %v, want empty", n, err)
		}
		if got := a.bot.bot.Stats().Received; got != 0 {
			t.Errorf("bad input counted %d messages", got)
		}
	}, singleServers...)
}

// TestRedisDownThenBack cuts the connection to Redis: events get 503 with
// Retry-After; VK re-delivers them once Redis is back and each is counted
// exactly once.
func TestRedisDownThenBack(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		proxy := redistest.NewProxy(t, tg.Addr)
		url := strings.Replace(tg.URL, tg.Addr, proxy.Addr(), 1)
		a := startApp(t, tg, map[string]string{"REDIS_URL": url})
		a.MustOK(t, event("before", 1, 1, "outage"))

		proxy.Cut()
		var failed [][]byte
		for i := range 3 {
			ev := event(fmt.Sprintf("during%d", i), 1, 2+i, "outage")
			code, _, hdr := a.Post(t, ev, nil)
			if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Fatalf("with Redis down: status %d Retry-After %q, want 503 with Retry-After", code, hdr.Get("Retry-After"))
			}
			failed = append(failed, ev)
		}
		if resp, err := http.Get(a.AdminURL("/readyz")); err != nil || resp.StatusCode != 503 {
			t.Errorf("/readyz with Redis down: %v %v, want 503", resp.StatusCode, err)
		}

		proxy.Restore()
		for _, ev := range failed { // VK re-delivers; some twice, as it does after a lost "ok"
			a.MustOK(t, ev)
			a.MustOK(t, ev)
		}
		a.MustOK(t, event("after", 1, 9, "outage"))
		// VK shows one message per random_id: before, the three re-delivered
		// (in any order), after, each once.
		eventually.True(t, 20*time.Second, "5 messages delivered", func() bool { return len(a.VK.Messages()) >= 5 })
		answers := []string{}
		for _, m := range a.VK.Messages() {
			answers = append(answers, m.Message)
		}
		if !sameNumbers(answers) {
			t.Errorf("answers before, during (re-delivered) and after the outage: %v; want each event counted once: 0 first, 4 last", answers)
		}
	}, singleServers...)
}

// TestProgramEndToEnd runs the program with real-shaped payloads of every
// shape VK sends and checks the replies at the fake VK API.
func TestProgramEndToEnd(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, nil)
		read := func(name string) []byte {
			b, err := os.ReadFile(filepath.Join("..", "..", "callback", "testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		code, body, _ := a.Post(t, read("confirmation.json"), nil)
		if code != 200 || body != "c0nf%d" {
			t.Errorf("confirmation answered %d %q, want the string verbatim", code, body)
		}
		a.MustOK(t, read("unknown_type.json"))
		files := []string{"message_new_private.json", "message_new_chat.json", "message_new_sticker.json", "message_new_photo.json", "message_new_flat.json"}
		for _, f := range files {
			a.MustOK(t, read(f))
		}
		for _, f := range files { // a second message of each shape, as a new event
			second := bytes.Replace(read(f), []byte(`"event_id": "`), []byte(`"event_id": "second-`), 1)
			a.MustOK(t, bytes.Replace(second, []byte(`"conversation_message_id": `), []byte(`"conversation_message_id": 9`), 1))
		}
		sends := a.WaitSends(t, 2*len(files))
		peers := map[int]bool{}
		for i, s := range sends {
			want := "0"
			if i >= len(files) {
				want = "1"
			}
			if s.Message != want || s.Token != "token-1" {
				t.Errorf("reply %d to %d = %q (token %q), want %s", i, s.PeerID, s.Message, s.Token, want)
			}
			peers[s.PeerID] = true
		}
		if !peers[2000000001] {
			t.Errorf("no reply went to the group chat 2000000001: %v", peers)
		}
	}, singleServers...)
}

func TestReadyzFailsWhenTokenRejected(t *testing.T) {
	a := startApp(t, nil, map[string]string{"SHUTDOWN_TIMEOUT": "200ms"}) // the held reply cannot drain
	a.VK.FailAlways(5)
	a.MustOK(t, event("e", 1, 1, "x"))
	eventually.True(t, 10*time.Second, "/readyz failing after VK rejected the token", func() bool {
		resp, err := http.Get(a.AdminURL("/readyz"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
}

func TestEmbeddedDefaultAndHealth(t *testing.T) {
	a := startApp(t, nil, map[string]string{"VK_TOKEN": "", "VK_GROUP_ID": "", "VK_SECRET": ""})
	body, _ := json.Marshal(map[string]any{"type": "message_new", "group_id": config.DemoGroupID, "event_id": "x",
		"object": map[string]any{"message": map[string]any{"peer_id": 5, "from_id": 5, "text": "demo", "conversation_message_id": 1}}})
	a.MustOK(t, body)
	for _, p := range []string{"/healthz", "/readyz", "/stats"} {
		resp, err := http.Get(a.AdminURL(p))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	if n := len(a.VK.Sends()); n != 0 {
		t.Errorf("dry-run sent %d messages", n)
	}
}

func TestSeveralCommunities(t *testing.T) {
	groups := `[{"group_id":11,"secret":"s11","confirmation":"c11","token":"t11"},{"group_id":22,"secret":"s22","confirmation":"c22","token":"t22a,t22b"}]`
	a := startApp(t, nil, map[string]string{"VK_GROUPS": groups, "VK_TOKEN": "", "VK_GROUP_ID": "", "VK_SECRET": "", "VK_CONFIRMATION": ""})
	post := func(group int, secret, typ, event string) (int, string) {
		b, _ := json.Marshal(map[string]any{"type": typ, "group_id": group, "secret": secret, "event_id": event,
			"object": map[string]any{"message": map[string]any{"peer_id": group, "from_id": group, "text": "same", "conversation_message_id": 1}}})
		code, body, _ := a.Post(t, b, nil)
		return code, body
	}
	if code, body := post(22, "s22", "confirmation", ""); body != "c22" {
		t.Errorf("confirmation of 22: %d %q", code, body)
	}
	if code, _ := post(22, "s11", "message_new", "x"); code != 403 {
		t.Errorf("group 22 with group 11's secret: %d, want 403", code)
	}
	for _, g := range []int{11, 22} {
		if code, body := post(g, "s"+strconv.Itoa(g), "message_new", "e"+strconv.Itoa(g)); code != 200 || body != "ok" {
			t.Fatalf("group %d: %d %q", g, code, body)
		}
	}
	for _, s := range a.WaitSends(t, 2) {
		want := map[int]string{11: "t11", 22: "t22"}[s.PeerID]
		if s.Message != "0" || !strings.HasPrefix(s.Token, want) {
			t.Errorf("reply %+v: want 0 through a token of its own community (%s…)", s, want)
		}
	}
}

var _ callback.MessageHandler = (*bot.Bot)(nil)

func TestMetricsMoveWithTraffic(t *testing.T) {
	a := startApp(t, nil, nil)
	scrape := func() string {
		resp, err := http.Get(a.AdminURL("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	a.VK.FailNext(10)
	a.MustOK(t, event("m1", 1, 1, "metrics"))
	a.Post(t, []byte("{"), nil)
	a.WaitSends(t, 1)
	want := []string{
		`vkcounter_webhook_requests_total{outcome="ok"} 1`,
		`vkcounter_webhook_requests_total{outcome="bad_request"} 1`,
		`vkcounter_webhook_duration_seconds_count 2`,
		`vkcounter_script_duration_seconds_count 1`,
		`vkcounter_vk_api_calls_total{code="10",method="messages.send"} 1`,
		`vkcounter_vk_api_calls_total{code="0",method="messages.send"} 1`,
		`vkcounter_replies_total{result="delivered"} 1`,
		`vkcounter_reply_age_seconds_count 1`,
		`vkcounter_outbox_length 0`,
		`vkcounter_outbox_oldest_seconds 0`,
		`vkcounter_outbox_redeliveries_total 0`,
		`go_goroutines`,
	}
	eventually.NoError(t, 5*time.Second, "/metrics", func() error {
		body, missing := scrape(), []string(nil)
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("lacks %q", missing)
		}
		return nil
	})
}

// sameNumbers reports whether answers are 0 first, 4 last and 1..3 in any
// order between: the re-delivered events may be counted in any order.
func sameNumbers(answers []string) bool {
	if len(answers) != 5 || answers[0] != "0" || answers[4] != "4" {
		return false
	}
	mid := append([]string(nil), answers[1:4]...)
	sort.Strings(mid)
	return strings.Join(mid, ",") == "1,2,3"
}
