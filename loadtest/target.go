package loadtest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// ErrRemote is wrapped by the error for a target outside the loopback
// range when remote targets are not allowed: a load run must never hit
// another machine by mistake.
var ErrRemote = errors.New("not on this machine's loopback, and remote targets are not allowed")

// CheckHost returns an error wrapping ErrRemote unless host (a host name or
// IP address, without port) is on the loopback: "localhost", 127.0.0.0/8,
// ::1, or empty (which dials the local host). allowRemote lets any host
// through.
func CheckHost(host string, allowRemote bool) error {
	if allowRemote || host == "" || strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("target %s: %w", host, ErrRemote)
}

// checkAddr is CheckHost for a host:port address.
func checkAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	return CheckHost(host, allowRemote)
}

// checkURL is CheckHost for an http(s) URL.
func checkURL(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: want http or https", raw)
	}
	return u, CheckHost(u.Hostname(), allowRemote)
}
