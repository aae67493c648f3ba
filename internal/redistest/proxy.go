package redistest

import (
	"testing"

	"github.com/vkcounter/vkcounter/internal/faultproxy"
)

// A Proxy forwards TCP connections to a Redis server and can cut, stall or
// slow them without touching the server itself (which may be shared). See
// package faultproxy.
type Proxy = faultproxy.Proxy

// NewProxy starts a proxy on 127.0.0.1:0 in front of target; it stops when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
