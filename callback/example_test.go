package callback_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/vkcounter/vkcounter/callback"
)

func ExampleNewHandler() {
	count := callback.MessageHandlerFunc(func(_ context.Context, m callback.Message) error {
		fmt.Printf("count %q from peer %d (event %s)\n", m.Text, m.PeerID, m.EventID)
		return nil
	})
	h, err := callback.NewHandler(count, callback.Options{
		Groups: []callback.Group{{ID: 218245623, Secret: "Vk7qR2xLmP9sT4wZ", Confirmation: "6b1d4e2f"}},
	})
	if err != nil {
		panic(err)
	}

	for _, body := range []string{
		`{"type":"confirmation","group_id":218245623,"secret":"Vk7qR2xLmP9sT4wZ"}`,
		`{"type":"message_new","group_id":218245623,"event_id":"5f2d0c7a","v":"5.199","secret":"Vk7qR2xLmP9sT4wZ",` +
			`"object":{"message":{"id":1843,"peer_id":385145727,"from_id":385145727,"text":"hello"},"client_info":{}}}`,
		`{"type":"message_new","group_id":218245623,"secret":"guess","object":{}}`,
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(body)))
		fmt.Printf("%d %q\n", w.Code, w.Body.String())
	}
	// Output:
	// 200 "6b1d4e2f"
	// count "hello" from peer 385145727 (event 5f2d0c7a)
	// 200 "ok"
	// 403 "forbidden\n"
}
