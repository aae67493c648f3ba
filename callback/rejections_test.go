package callback_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/callback"
)

// TestRejectedByReason: every refused request is counted once, under its
// reason; a counted message, an ignored event, a confirmation and a 503
// are not refusals.
func TestRejectedByReason(t *testing.T) {
	tests := []struct {
		name string
		req  request
		want callback.Reason
	}{
		{"wrong secret", request{body: event("message_new", fixtureGroup, "Vk7qR2xLmP9sT4wY", textObject)}, callback.WrongSecret},
		{"missing secret", request{body: `{"type":"message_new","group_id":218245623,"object":` + textObject + `}`}, callback.WrongSecret},
		{"wrong secret on confirmation", request{body: event("confirmation", fixtureGroup, "nope", "{}")}, callback.WrongSecret},
		{"unknown community", request{body: event("message_new", 999, fixtureSecret, textObject)}, callback.UnknownCommunity},
		{"no group_id", request{body: `{"type":"message_new","object":` + textObject + `}`}, callback.UnknownCommunity},
		{"no confirmation string", request{body: `{"type":"confirmation","group_id":2}`}, callback.NoConfirmation},
		{"not JSON", request{body: "type=message_new"}, callback.Malformed},
		{"message without peer_id", request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"id":5,"text":"hi"}}`)}, callback.Malformed},
		{"too large", request{body: event("message_new", fixtureGroup, fixtureSecret, `{"message":{"peer_id":5,"text":"`+strings.Repeat("x", 2048)+`"}}`)}, callback.TooLarge},
		{"GET", request{method: http.MethodGet}, callback.WrongMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustHandler(t, &recorder{}, callback.Options{MaxBodyBytes: 1024})
			for range 3 {
				if w := serve(h, tt.req); w.Code < 400 || w.Code >= 500 {
					t.Fatalf("answered %d %q, want a refusal", w.Code, w.Body)
				}
			}
			for _, r := range callback.Reasons() {
				want := int64(0)
				if r == tt.want {
					want = 3
				}
				if got := h.Rejected(r); got != want {
					t.Errorf("Rejected(%s) = %d, want %d", r, got, want)
				}
			}
		})
	}

	h := mustHandler(t, &recorder{}, callback.Options{})
	serve(h, request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)})
	serve(h, request{body: event("message_reply", fixtureGroup, fixtureSecret, "{}")})
	serve(h, request{body: event("confirmation", fixtureGroup, fixtureSecret, "null")})
	failing := mustHandler(t, &recorder{err: errors.New("redis down")}, callback.Options{})
	if w := serve(failing, request{body: event("message_new", fixtureGroup, fixtureSecret, textObject)}); w.Code != 503 {
		t.Fatalf("answered %d, want 503", w.Code)
	}
	for _, r := range callback.Reasons() {
		if h.Rejected(r)+failing.Rejected(r) != 0 {
			t.Errorf("Rejected(%s) = %d and %d after requests that were not refused", r, h.Rejected(r), failing.Rejected(r))
		}
	}
}

func TestReasonNames(t *testing.T) {
	var names []string
	for _, r := range callback.Reasons() {
		names = append(names, r.String())
	}
	if got := strings.Join(names, " "); got != "wrong_secret unknown_community no_confirmation malformed too_large wrong_method" {
		t.Errorf("reasons %s", got)
	}
}
