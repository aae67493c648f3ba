package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/metrics"
)

// TestWrappedHandlersSetDeadlines: a handler wrapped by Webhook or
// CountersHTTP can set its connection's read and write deadlines through
// http.ResponseController, as the webhook's body deadline does.
func TestWrappedHandlersSetDeadlines(t *testing.T) {
	m := metrics.New()
	for name, wrap := range map[string]func(http.Handler) http.Handler{"Webhook": m.Webhook, "CountersHTTP": m.CountersHTTP} {
		t.Run(name, func(t *testing.T) {
			errs := make(chan error, 2)
			srv := httptest.NewServer(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				errs <- rc.SetReadDeadline(time.Now().Add(time.Minute))
				errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
			})))
			defer srv.Close()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, what := range []string{"Read", "Write"} {
				if err := <-errs; err != nil {
					t.Errorf("Set%sDeadline through %s: %v", what, name, err)
				}
			}
		})
	}
}
