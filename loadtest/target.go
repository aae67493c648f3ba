package loadtest

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// ErrRemote is wrapped by the error for a target outside the loopback
// range when remote targets are not allowed: a load run must never hit
// another machine by mistake.
var ErrRemote = errors.New("not on this machine's loopback; give -allow-remote to load another machine")

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

// The checks below name what they refuse by its flag (name), as
// `vkcounter loadtest` takes it: an option's error reads the same from the
// command line and from the package.

// checkHost is CheckHost for the host of the flag name.
func checkHost(name, host string, allowRemote bool) error {
	if CheckHost(host, allowRemote) != nil {
		return fmt.Errorf("-%s: %s is %w", name, host, ErrRemote)
	}
	return nil
}

// checkAddr checks the host:port address of the flag name, and its host as
// checkHost does.
func checkAddr(name, addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-%s %q: want HOST:PORT such as 127.0.0.1:11215", name, addr)
	}
	return checkHost(name, host, allowRemote)
}

// checkURL checks the http(s) URL of the flag name, and its host as
// checkHost does.
func checkURL(name, raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-%s %q: want an http:// or https:// URL", name, raw)
	}
	return checkHost(name, u.Hostname(), allowRemote)
}

// checkListenAddr checks the listen address of the flag name.
func checkListenAddr(name, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("-%s %q: want HOST:PORT such as 127.0.0.1:0", name, addr)
	}
	return nil
}

// checkRedis checks the Redis URL and cluster seeds of the bot (either may
// be empty), refusing servers outside the loopback as checkHost does.
func checkRedis(redisURL, cluster string, allowRemote bool) error {
	if redisURL != "" {
		u, err := url.Parse(redisURL)
		if err != nil {
			return fmt.Errorf("-redis %q: %w", redisURL, err)
		}
		if err := checkHost("redis", u.Hostname(), allowRemote); err != nil {
			return err
		}
	}
	for _, addr := range strings.Split(cluster, ",") {
		if addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(strings.TrimSpace(addr))
		if err != nil {
			return fmt.Errorf("-redis-cluster %q: %w", addr, err)
		}
		if err := checkHost("redis-cluster", host, allowRemote); err != nil {
			return err
		}
	}
	return nil
}

// atLeast refuses a value of the flag name below least.
func atLeast[T int | int64 | float64 | time.Duration](name string, v, least T) error {
	switch {
	case v >= least:
		return nil
	case least == 0:
		return fmt.Errorf("-%s %v: must not be negative", name, v)
	}
	return fmt.Errorf("-%s %v: must be at least %v", name, v, least)
}

// atMost refuses a value of the flag name above most.
func atMost(name string, v, most int) error {
	if v > most {
		return fmt.Errorf("-%s %d: must be at most %d", name, v, most)
	}
	return nil
}

// positive refuses a time limit of the flag name that is not above 0.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("-%s %v: must be more than 0", name, d)
	}
	return nil
}

// finite refuses NaN and infinities.
func finite(name string, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("-%s %v: want a number such as 20 or 2.5", name, f)
	}
	return nil
}

// fraction refuses a share of the flag name outside 0 … 1 (or NaN).
func fraction(name string, f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("-%s %v: must be between 0 and 1", name, f)
	}
	return nil
}

// firstError returns the first of errs that is not nil: the checks of one
// option, the later ones meaningful only once the earlier passed.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
