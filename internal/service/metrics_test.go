package service

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// TestMetricsFollowPrometheusConventions lints a live scrape with
// client_golang's promlint, after traffic on every instrumented path, and
// checks what the linter cannot: the known series exist from the first
// scrape, status labels are snake_case, and latency buckets reach tens of
// seconds.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	a := startApp(t, nil, map[string]string{"COUNTER_ADDR": "127.0.0.1:0", "VK_TOKEN": "", "VK_GROUP_ID": "", "VK_SECRET": ""})

	fresh := a.ScrapeMetrics(t)
	for _, want := range []string{
		`vkcounter_webhook_requests_total{outcome="unavailable"} 0`,
		`vkcounter_replies_total{result="dry_run"} 0`,
		`vkcounter_replies_total{result="unknown_error"} 0`,
		`vkcounter_replies_total{result="drop"} 0`,
		`vkcounter_vk_api_calls_total{code="0",method="execute"} 0`,
		`vkcounter_counterport_requests_total{opcode="acquire",status="ok"} 0`,
		`vkcounter_counters_http_requests_total{code="200",method="POST",route="/counters/participants/{name}/visit"} 0`,
		`vkcounter_build_info{goversion="go`,
	} {
		if !strings.Contains(fresh, want) {
			t.Errorf("first scrape lacks %s", want)
		}
	}

	body, _ := json.Marshal(map[string]any{"type": "message_new", "group_id": config.DemoGroupID, "event_id": "m1",
		"object": map[string]any{"message": map[string]any{"peer_id": 5, "from_id": 5, "text": "lint me", "conversation_message_id": 1}}})
	a.MustOK(t, body)
	a.Post(t, []byte("{"), nil)
	a.MustAPI(t, "POST", "/counters/access/pages", "", 200, `{"name":"pages","total":1}`)
	a.MustAPI(t, "GET", "/counters/access/never", "", 404, `{"error":"access: counter not found"}`)
	a.mustTotal(t, "pages", 1)
	c := servicetest.DialCounters(t.Context(), t, a.CounterAddr())
	if _, err := c.Total(t.Context(), "never"); err == nil {
		t.Fatal("total never: no error, want not found")
	}
	eventually.NoError(t, 5*time.Second, "/metrics", func() error {
		if !strings.Contains(a.ScrapeMetrics(t), `vkcounter_replies_total{result="dry_run"} 1`) {
			return errors.New("the dry-run reply is not in /metrics")
		}
		return nil
	})

	scrape := a.ScrapeMetrics(t)
	problems, err := promlint.New(strings.NewReader(scrape)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`vkcounter_replies_total{result="delivered"} 0`, // dry-run is not delivered
		`vkcounter_counterport_requests_total{opcode="total",status="not_found"} 1`,
		`vkcounter_counterport_requests_total{opcode="total",status="ok"} 1`,
		`vkcounter_counters_http_requests_total{code="200",method="POST",route="/counters/access/{name}"} 1`,
		`vkcounter_counters_http_requests_total{code="404",method="GET",route="/counters/access/{name}"} 1`,
		`vkcounter_counters_http_duration_seconds_count{route="/counters/access/{name}"} 2`,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	for _, m := range regexp.MustCompile(`status="([^"]*)"`).FindAllStringSubmatch(scrape, -1) {
		if !regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`).MatchString(m[1]) {
			t.Errorf("status label %q is not snake_case", m[1])
		}
	}
	largest := 0.0
	for _, m := range regexp.MustCompile(`vkcounter_vk_api_duration_seconds_bucket\{method="execute",le="([0-9.e+]+)"\}`).FindAllStringSubmatch(scrape, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > largest {
			largest = v
		}
	}
	if largest < 60 {
		t.Errorf("largest finite latency bucket %gs: VK calls and reply ages run to tens of seconds", largest)
	}
}

// TestFreshScrapeHasEveryAlertSeries: the first scrape of a service that
// did nothing yet holds every label set an alert or a dashboard panel
// reads, so that increase() and rate() see their first event: the counter
// port's refusals (0x82 out_of_memory, store_unavailable), the API's 507
// and 503, the outbox-full and Redis script errors, each VK error code the
// sender classifies (token checks included), readiness, Redis and the
// state of every token.
func TestFreshScrapeHasEveryAlertSeries(t *testing.T) {
	a := startApp(t, nil, map[string]string{"COUNTER_ADDR": "127.0.0.1:0"})
	fresh := a.ScrapeMetrics(t)
	want := []string{
		`vkcounter_counterport_requests_total{opcode="acquire",status="out_of_memory"} 0`,
		`vkcounter_counterport_requests_total{opcode="hit",status="out_of_memory"} 0`,
		`vkcounter_counterport_requests_total{opcode="acquire",status="store_unavailable"} 0`,
		`vkcounter_counters_http_requests_total{code="507",method="POST",route="/counters/access/{name}"} 0`,
		`vkcounter_counters_http_requests_total{code="503",method="POST",route="/counters/access/{name}"} 0`,
		`vkcounter_script_errors_total{cause="outbox_full"} 0`,
		`vkcounter_script_errors_total{cause="redis"} 0`,
		`vkcounter_webhook_requests_total{outcome="unavailable"} 0`,
		`vkcounter_replies_total{result="drop"} 0`,
		`vkcounter_vk_api_calls_total{code="transport",method="messages.send"} 0`,
		`vkcounter_vk_api_calls_total{code="5",method="groups.getTokenPermissions"}`,
		`vkcounter_ready `,
		`vkcounter_redis_up 1`,
		`vkcounter_outbox_length 0`,
		`vkcounter_outbox_oldest_seconds 0`,
	}
	for _, code := range bot.CallResults() {
		for _, method := range []string{"messages.send", "execute"} {
			want = append(want, `vkcounter_vk_api_calls_total{code="`+code+`",method="`+method+`"} 0`)
		}
	}
	for _, s := range tokens.States() {
		want = append(want, `vkcounter_vk_token_state{group="`+strconv.Itoa(testGroup)+`",state="`+s.String()+`",token="0"}`)
	}
	for _, w := range want {
		if !strings.Contains(fresh, w) {
			t.Errorf("first scrape lacks %s", w)
		}
	}
	eventually.NoError(t, 10*time.Second, "the token accepted in /metrics", func() error {
		scrape := a.ScrapeMetrics(t)
		for _, w := range []string{`vkcounter_ready 1`, `vkcounter_vk_token_state{group="` + strconv.Itoa(testGroup) + `",state="ok",token="0"} 1`,
			`vkcounter_vk_api_calls_total{code="0",method="groups.getTokenPermissions"} 1`} {
			if !strings.Contains(scrape, w) {
				return errors.New("no " + w + " once VK accepted the token")
			}
		}
		return nil
	})
}
