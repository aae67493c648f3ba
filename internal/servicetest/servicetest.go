// Package servicetest runs the whole service for one test, as `vkcounter
// serve` does, on :0 ports, against a Redis of redistest (or the embedded
// one) and a fresh fake VK API (vktest), and talks to it: the webhook, the
// counters API, the admin server and the replies VK received. The tests of
// internal/service and of the commands in cmd/vkcounter share it.
//
// It takes the service's constructor as an argument rather than importing
// internal/service, so that the service's own tests, inside its package,
// can use it.
package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

const (
	// Group is the community the service serves unless env says
	// otherwise: the group of callback/testdata.
	Group = 218245623
	// Secret is Group's Callback API secret.
	Secret = "Vk7qR2xLmP9sT4wZ"
)

// SingleServers are the backends tests run on when they need a redis://
// URL (redistest.Run's kinds without the cluster).
var SingleServers = []redistest.Kind{redistest.Mini, redistest.Real}

// A Service is what Start runs: internal/service's Main.
type Service interface {
	Run(ctx context.Context) error
	Close() error
	HTTPAddr() string
	AdminAddr() string
	CounterAddr() string
}

// Env is the running service as a test sees it from outside (its
// addresses, Close) and what the test has besides: the fake VK API it
// sends to, its key prefix, its Redis and its settings.
type Env struct {
	Service
	VK     *vktest.Server
	Prefix string
	Target redistest.Target // the Redis the test runs on (nil Kind: embedded)
	Config config.Config    // the settings the service runs with
}

// Start runs the service that open makes, against tg (nil = the embedded
// Redis) and a fresh fake VK API; env overrides the test defaults. The
// service logs to log (nil: the test's log): warnings and errors, unless
// env sets LOG_LEVEL. It is closed when the test ends.
func Start[S Service](t testing.TB, tg *redistest.Target, env map[string]string, log io.Writer, open func(config.Config, zerolog.Logger) S) (S, *Env) {
	t.Helper()
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	e := &Env{VK: vk, Prefix: redistest.Prefix(t)}
	vars := map[string]string{
		"HTTP_ADDR":       "127.0.0.1:0",
		"ADMIN_ADDR":      "127.0.0.1:0",
		"COUNTER_ADDR":    "off",
		"KEY_PREFIX":      e.Prefix,
		"VK_API_URL":      vk.MethodURL(),
		"VK_TOKEN":        "token-1",
		"VK_GROUP_ID":     strconv.Itoa(Group),
		"VK_SECRET":       Secret,
		"VK_CONFIRMATION": "c0nf%d",
		"VK_RATE":         "1000",
		"LOG_LEVEL":       "warn",
	}
	if tg != nil {
		e.Target = *tg
		switch tg.Kind {
		case redistest.Cluster:
			vars["REDIS_CLUSTER"] = tg.Addr // one seed is enough: the client discovers the rest
		default:
			vars["REDIS_URL"] = tg.URL
		}
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, _, err := config.Parse(flag.NewFlagSet("serve", flag.ContinueOnError), nil, func(k string) string { return vars[k] }, func() {})
	if err != nil {
		t.Fatal(err)
	}
	e.Config = cfg
	if log == nil {
		log = zerolog.NewTestWriter(t)
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel) // warn unless env says otherwise
	if err != nil {
		t.Fatal(err)
	}
	// The command's redactor, without its timestamps (tests match lines).
	s := open(cfg, zerolog.New(config.Redactor(cfg).Writer(log)).Level(level))
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Before Close (cleanups run last first): the test's client closes
	// its idle connections. One it dialed for a burst and never sent a
	// request on is new to the server, and http.Server.Shutdown waits 5 s
	// before it takes a new connection for idle.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	e.Service = s
	return s, e
}

// WithCounterPort is an env for Start that opens the counter port on a
// free loopback port, plus the pairs kv (name, value, …).
func WithCounterPort(kv ...string) map[string]string {
	m := map[string]string{"COUNTER_ADDR": "127.0.0.1:0"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// URL is path on the public HTTP server, AdminURL on the admin one.
func (e *Env) URL(path string) string      { return "http://" + e.HTTPAddr() + path }
func (e *Env) AdminURL(path string) string { return "http://" + e.AdminAddr() + path }

// Post sends body to the webhook and returns the status, body and headers.
func (e *Env) Post(t testing.TB, body []byte, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.URL("/callback"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// MustOK posts body to the webhook and fails the test unless it answers
// 200 ok.
func (e *Env) MustOK(t testing.TB, body []byte) {
	t.Helper()
	if code, got, _ := e.Post(t, body, nil); code != 200 || got != "ok" {
		t.Fatalf("webhook answered %d %q, want 200 ok", code, got)
	}
}

// WaitSends waits up to 20 s for n messages.send calls at the fake VK API
// and returns them.
func (e *Env) WaitSends(t testing.TB, n int) []vktest.Send {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := e.VK.WaitSends(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// API sends a request to the service's counters HTTP API and returns the
// status and the body without its final newline.
func (e *Env) API(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.URL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, strings.TrimSuffix(string(b), "\n")
}

// MustAPI is API that requires the status code and the exact body.
func (e *Env) MustAPI(t testing.TB, method, path, body string, code int, want string) {
	t.Helper()
	if got, b := e.API(t, method, path, body); got != code || b != want {
		t.Fatalf("%s %s: %d %s; want %d %s", method, path, got, b, code, want)
	}
}

// ScrapeMetrics returns the admin server's /metrics.
func (e *Env) ScrapeMetrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(e.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// DropAccessKeys deletes the access and unique counters' keys under
// prefix (they never expire) when the test ends, one by one since a
// cluster spreads them over slots.
func DropAccessKeys(t testing.TB, tg *redistest.Target, prefix string) {
	t.Cleanup(func() {
		// Access and unique counters do not expire.
		for _, k := range append(redistest.Keys(t, tg.Client, prefix+"a:"), redistest.Keys(t, tg.Client, prefix+"u:")...) {
			tg.Client.Del(context.Background(), k)
		}
	})
}

// Event builds a 5.199-shaped message_new to Group.
func Event(eventID string, peer, cmid int, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "message_new", "group_id": Group, "event_id": eventID, "v": "5.199", "secret": Secret,
		"object": map[string]any{
			"message":     map[string]any{"id": cmid, "date": 1764115200, "peer_id": peer, "from_id": peer, "text": text, "conversation_message_id": cmid, "attachments": []any{}},
			"client_info": map[string]any{"keyboard": true, "lang_id": 0},
		},
	})
	return b
}

// DemoEnv is the README's demo: no Redis, no token, no community set
// (dry-run, demo community 1, the embedded Redis).
var DemoEnv = map[string]string{"VK_TOKEN": "", "VK_GROUP_ID": "", "VK_SECRET": "", "VK_CONFIRMATION": ""}

// DemoEvent is the README's curl: a message_new for the demo community.
func DemoEvent(eventID string, id int, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "message_new", "group_id": config.DemoGroupID, "event_id": eventID, "v": "5.199",
		"object": map[string]any{"message": map[string]any{"id": id, "peer_id": 42, "from_id": 42, "date": 1764115200,
			"conversation_message_id": id, "text": text}},
	})
	return b
}
