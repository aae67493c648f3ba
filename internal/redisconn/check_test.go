package redisconn_test

import (
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// TestCheckURLAndCluster: a Redis URL and cluster seeds are refused with
// what is wrong and the form wanted, and never with the URL itself (it may
// hold a password); good ones pass.
func TestCheckURLAndCluster(t *testing.T) {
	for _, v := range []string{"redis://127.0.0.1:6379/0", "rediss://:secret@h:6380/1", "unix:///run/redis.sock"} {
		if err := redisconn.CheckURL(v); err != nil {
			t.Errorf("CheckURL(%q) = %v", v, err)
		}
	}
	for v, want := range map[string]string{
		"127.0.0.1:6390":             `"127.0.0.1:6390" is an address, not a URL: write redis://127.0.0.1:6390/0`,
		"redis://h:port/0":           "not a URL",
		"http://:secret@h:1/0":       `scheme "http": want redis://host:6379/0`,
		"//:secret@h:1/0":            "no scheme",
		"redis://:secret@h:1/banana": "want redis://host:6379/0",
	} {
		err := redisconn.CheckURL(v)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckURL(%q) = %v, want an error with %q and no password", v, err, want)
		}
	}
	if err := redisconn.CheckCluster("a:1,b:2"); err != nil {
		t.Errorf("CheckCluster = %v", err)
	}
	for v, want := range map[string]string{
		"redis://a:1": "seeds are host:port addresses, not URLs",
		"a:1,b":       `"b": want comma-separated host:port`,
		"a:0":         "want comma-separated host:port",
	} {
		if err := redisconn.CheckCluster(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCluster(%q) = %v, want %q", v, err, want)
		}
	}
}

// TestWhere: a Redis is named for messages by its address or its
// cluster's seeds, never with the URL's password.
func TestWhere(t *testing.T) {
	for _, tc := range []struct {
		cfg  redisconn.Config
		want string
	}{
		{redisconn.Config{URL: "redis://:s3cret@10.0.0.5:6380/0"}, "Redis at 10.0.0.5:6380"},
		{redisconn.Config{URL: "rediss://user:s3cret@cache.example:6379"}, "Redis at cache.example:6379"},
		{redisconn.Config{Cluster: []string{"a:7000", "b:7001"}, URL: "redis://h:1/0"}, "Redis Cluster a:7000,b:7001"},
		{redisconn.Config{Addr: "127.0.0.1:4321"}, "Redis at 127.0.0.1:4321"},
		{redisconn.Config{URL: "not a url"}, "Redis"},
	} {
		if got := tc.cfg.Where(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
