package httpapi_test

import (
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, tc := range []struct {
		name, token, remote, auth string
		want                      int
		wantBody                  string
	}{
		{"no token, loopback v4", "", "127.0.0.1:5000", "", 204, ""},
		{"no token, loopback v6", "", "[::1]:5000", "", 204, ""},
		{"no token, remote", "", "10.0.0.7:5000", "", 401, "set it on the server"},
		{"no token, remote with a header", "", "10.0.0.7:5000", "Bearer anything", 401, "COUNTERS_HTTP_TOKEN"},
		{"token, none sent", "s3cret", "127.0.0.1:5000", "", 401, "COUNTERS_HTTP_TOKEN"},
		{"token, wrong", "s3cret", "10.0.0.7:5000", "Bearer wrong", 401, ""},
		{"token, no scheme", "s3cret", "10.0.0.7:5000", "s3cret", 401, ""},
		{"token, other scheme", "s3cret", "10.0.0.7:5000", "Basic s3cret", 401, ""},
		{"token, prefix only", "s3cret", "10.0.0.7:5000", "Bearer s3cre", 401, ""},
		{"token, right", "s3cret", "10.0.0.7:5000", "Bearer s3cret", 204, ""},
		{"token, lower-case scheme", "s3cret", "10.0.0.7:5000", "bearer s3cret", 204, ""},
		{"token, upper-case scheme", "s3cret", "10.0.0.7:5000", "BEARER s3cret", 204, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/counters/access/x", nil)
			req.RemoteAddr = tc.remote
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			httpapi.RequireToken(tc.token, ok).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
			if tc.want == 401 {
				if rec.Header().Get("WWW-Authenticate") == "" || !strings.HasPrefix(rec.Body.String(), `{"error":`) {
					t.Errorf("401 without WWW-Authenticate or JSON error: %v %s", rec.Header(), rec.Body)
				}
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %s, want it to contain %q", rec.Body, tc.wantBody)
			}
		})
	}
}
