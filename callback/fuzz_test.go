package callback_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkcounter/vkcounter/callback"
)

// FuzzServeHTTP posts arbitrary bodies. Whatever the body, the handler
// answers one of its documented statuses, and passes a message on only
// with a 200 "ok", for a configured community, with a usable peer_id.
func FuzzServeHTTP(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(event("message_new", fixtureGroup, fixtureSecret, textObject)))
	f.Add([]byte(event("message_new", 2, "", `{"peer_id":1,"attachments":[{"type":"x","x":{"id":"1","owner_id":-1}}]}`)))
	f.Add([]byte(`{"type":"confirmation","group_id":3,"secret":"s3"}`))

	configured := map[int]bool{}
	for _, g := range fixtureGroups {
		configured[g.ID] = true
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		var (
			calls int
			last  callback.Message
		)
		next := callback.MessageHandlerFunc(func(_ context.Context, m callback.Message) error {
			calls++
			last = m
			return nil
		})
		w := serve(mustHandler(t, next, callback.Options{MaxBodyBytes: 4 << 10}), request{body: string(body)})

		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
		if calls > 1 {
			t.Fatalf("%d messages from one request", calls)
		}
		if calls == 1 {
			m := last
			if w.Code != http.StatusOK || w.Body.String() != "ok" {
				t.Fatalf("message passed on, but answered %d %q", w.Code, w.Body)
			}
			if !configured[m.GroupID] || m.PeerID <= 0 {
				t.Fatalf("unusable message passed on: %+v", m)
			}
		}
	})
}
