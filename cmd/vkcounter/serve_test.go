package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestServeConfigErrors: a malformed Redis setting is a usage error (exit
// 2) that does not repeat a password the URL may hold (the settings'
// own errors: internal/config's TestConfigErrors).
func TestServeConfigErrors(t *testing.T) {
	for _, name := range []string{"REDIS_URL", "COUNTERS_REDIS_URL"} {
		var stderr bytes.Buffer
		code := run(context.Background(), nil, func(k string) string {
			return map[string]string{name: "redis://:s3cret@h:port/0"}[k]
		}, io.Discard, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), name+":") || strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("exit %d, stderr %q: want 2 naming %s without its password", code, stderr.String(), name)
		}
	}
}

func TestServeHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-help"}, func(string) string { return "" }, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range config.Settings() {
		if !strings.Contains(out.String(), s.Env) || !strings.Contains(out.String(), "-"+config.FlagName(s.Env)) {
			t.Errorf("-help does not list %s", s.Env)
		}
	}
}

// TestNoPasswordPrintedAtStart: a REDIS_CLUSTER seed, a REDIS_URL or a
// COUNTERS_REDIS_URL with a password, refused or unreachable: the error
// at start does not print the password.
func TestNoPasswordPrintedAtStart(t *testing.T) {
	const pw = "Sekr1t-Passw0rd"
	for _, tc := range []struct {
		name string
		env  map[string]string
		code int
	}{
		{"cluster seed user:password@host", map[string]string{"REDIS_CLUSTER": "default:" + pw + "@127.0.0.1:1"}, exitUsage},
		{"cluster seed as a URL", map[string]string{"REDIS_CLUSTER": "127.0.0.1:2,redis://:" + pw + "@127.0.0.1:1"}, exitUsage},
		{"cluster seed cut short", map[string]string{"REDIS_CLUSTER": ":" + pw + "@127.0.0.1"}, exitUsage},
		{"unreachable URL", map[string]string{"REDIS_URL": "redis://:" + pw + "@127.0.0.1:1/0"}, exitFailure},
		{"unreachable counters URL", map[string]string{"COUNTERS_REDIS_URL": "redis://u:" + pw + "@127.0.0.1:1/0", "COUNTER_ADDR": "off"}, exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "ADMIN_ADDR": "127.0.0.1:0", "COUNTER_ADDR": "off"}
			for k, v := range tc.env {
				vars[k] = v
			}
			// Buffers safe for concurrent writes: go-redis's logger is the
			// process's, so another run's client may write here meanwhile.
			var stdout, stderr syncbuf.Buffer
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			code := run(ctx, []string{"serve"}, func(k string) string { return vars[k] }, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
			if strings.Contains(strings.ToLower(out), strings.ToLower(pw[:8])) {
				t.Errorf("the password is printed:\n%s", out)
			}
			if !strings.Contains(out, "[secret]") && tc.code == exitUsage {
				t.Errorf("no mark where the password was removed:\n%s", out)
			}
		})
	}
}
