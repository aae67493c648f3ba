package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// requireToken guards next, the counters HTTP API. With a token, a request
// must carry "Authorization: Bearer <token>" (the scheme in any case, as RFC
// 7235 allows; the token compared in constant time). Without one, only
// clients connecting from a loopback address are let through, since the API
// has no other protection. Every refusal is a 401 with a JSON error saying
// what to do.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !FromLoopback(r) {
				unauthorized(w, "the counters API answers only loopback clients while COUNTERS_HTTP_TOKEN is unset; set it on the server and send the header Authorization: Bearer TOKEN")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			unauthorized(w, "a valid bearer token is required (COUNTERS_HTTP_TOKEN)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of an Authorization header using the
// Bearer scheme.
func bearer(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(cred, " "), true
}

// FromLoopback reports whether r came over a connection from a loopback
// address. Behind a proxy on the same host every request does.
func FromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="counters"`)
	writeJSONError(w, http.StatusUnauthorized, msg)
}
