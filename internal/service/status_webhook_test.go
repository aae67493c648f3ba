package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/admin/admintest"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// wrongSecretEvent is a message_new for the test's community with a
// secret that is not its own.
func wrongSecretEvent(eventID string, id int) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "message_new", "group_id": testGroup, "event_id": eventID, "v": "5.199", "secret": "not-the-secret",
		"object": map[string]any{"message": map[string]any{"id": id, "peer_id": 7, "from_id": 7, "text": "hi", "conversation_message_id": id}},
	})
	return b
}

// TestStatusPageShowsRejections: ten webhooks with a wrong secret, and one
// refused for each other reason, are on the page and in /stats by reason
// (the same figures, every reason present) and in /metrics; the page says
// what a wrong secret means; nothing refused is counted.
func TestStatusPageShowsRejections(t *testing.T) {
	a := startApp(t, redistest.Open(t, redistest.Mini), map[string]string{"MAX_BODY_BYTES": "4096"})
	for i := range 10 {
		if code, _, _ := a.Post(t, wrongSecretEvent(fmt.Sprintf("w%d", i), i+1), nil); code != http.StatusForbidden {
			t.Fatalf("wrong secret answered %d, want 403", code)
		}
	}
	unknown := strings.Replace(string(event("u1", 7, 1, "hi")), fmt.Sprint(testGroup), "999", 1)
	for _, body := range []string{unknown, "{not json", `{"type":"message_new","group_id":` + fmt.Sprint(testGroup) + `,"secret":"` + testSecret + `","object":{"message":{"peer_id":7,"text":"` + strings.Repeat("x", 5000) + `"}}}`} {
		if code, _, _ := a.Post(t, []byte(body), nil); code < 400 || code >= 500 {
			t.Fatalf("answered %d, want a refusal", code)
		}
	}

	want := map[string]string{"wrong_secret": "10", "unknown_community": "1", "malformed": "1", "too_large": "1", "no_confirmation": "0", "wrong_method": "0"}
	stats := a.getStats(t)
	_, page := a.getPage(t)
	shown := admintest.PageStats(page)
	for _, r := range callback.Reasons() {
		path := "webhook.rejected." + r.String()
		if stats[path] != want[r.String()] || shown[path] != want[r.String()] {
			t.Errorf("%s: /stats %q, page %q, want %s", path, stats[path], shown[path], want[r.String()])
		}
	}
	if stats["bot.received"] != "0" {
		t.Errorf("refused requests were counted: bot.received %s", stats["bot.received"])
	}
	for _, s := range []string{"10 webhook requests refused for a wrong or missing secret", "VK_SECRET is not the secret key in the community's Callback API settings"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	resp, err := http.Get(a.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, s := range []string{`vkcounter_webhook_rejected_total{reason="wrong_secret"} 10`, `vkcounter_webhook_rejected_total{reason="too_large"} 1`, `vkcounter_webhook_rejected_total{reason="wrong_method"} 0`} {
		if !strings.Contains(string(metrics), s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
}
