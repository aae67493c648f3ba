package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/version"
)

// TestHelpAndUsageErrors: every command's help exits 0 with the usage on
// stdout and nothing on stderr; every usage error exits 2 with one error
// (printed once) and a pointer to -h on stderr, and nothing on stdout.
func TestHelpAndUsageErrors(t *testing.T) {
	noEnv := func(string) string { return "" }
	call := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, noEnv, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"-h"}, "Commands:\n  serve "},
		{[]string{"--help"}, "Commands:\n  serve "},
		{[]string{"help"}, "Commands:\n  serve "},
		{[]string{"serve", "-h"}, "COUNTER_ADDR"},
		{[]string{"cnt", "-h"}, "acquire NAME RESOURCES MAXIMUM"},
		{[]string{"loadtest", "-h"}, "loadtest callback"},
		{[]string{"loadtest", "callback", "-h"}, "-spawn"},
		{[]string{"loadtest", "counters", "-h"}, "-requests 0"},
		{[]string{"setup", "-h"}, "-url"},
		{[]string{"version", "-h"}, "Usage: vkcounter version"},
		{[]string{"prefill", "-h"}, "Usage: vkcounter prefill"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := call(tc.args...)
			if code != 0 || !strings.Contains(out, tc.want) || errOut != "" {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0, %q on stdout, nothing on stderr", code, errOut, out, tc.want)
			}
		})
	}
	// The top-level help lists every subcommand before serve's settings.
	_, out, _ := call("-h")
	for _, c := range commands() {
		if i := strings.Index(out, "  "+c.name+" "); i < 0 || i > strings.Index(out, "HTTP_ADDR") {
			t.Errorf("vkcounter -h does not list %q before the settings", c.name)
		}
	}

	for _, tc := range []struct {
		args []string
		want string // the error line
	}{
		{[]string{"-nope"}, "vkcounter serve: flag provided but not defined: -nope"},
		{[]string{"serve", "-window", "abc"}, `vkcounter serve: invalid value "abc" for flag -window: want a Go duration such as 90s, 10m or 24h`},
		{[]string{"serve", "extra"}, `vkcounter serve: unexpected argument "extra"`},
		{[]string{"bogus"}, `vkcounter: unknown command "bogus" (serve, cnt, loadtest, setup, prefill, count, healthcheck, version)`},
		{[]string{"cnt"}, "vkcounter cnt: no command given"},
		{[]string{"cnt", "-nope", "noop"}, "vkcounter cnt: flag provided but not defined: -nope"},
		{[]string{"cnt", "-timeout", "5", "noop"}, `vkcounter cnt: invalid value "5" for flag -timeout: want a Go duration`},
		{[]string{"loadtest", "bogus"}, `vkcounter loadtest: unknown tool "bogus"`},
		{[]string{"loadtest", "counters", "-nope"}, "vkcounter loadtest counters: flag provided but not defined: -nope"},
		{[]string{"loadtest", "counters", "-conns", "x", "-spawn"}, `vkcounter loadtest counters: invalid value "x" for flag -conns: want a whole number`},
		{[]string{"loadtest", "callback", "-allow-remote=maybe", "-spawn"}, `want true or false`},
		{[]string{"setup", "-nope"}, "vkcounter setup: flag provided but not defined: -nope"},
		{[]string{"version", "extra"}, `vkcounter version: unexpected argument "extra"`},
		{[]string{"prefill", "-expired", "x"}, `vkcounter prefill: invalid value "x" for flag -expired: want a whole number`},
		// Nothing is written when the service's Redis is the embedded one.
		{[]string{"prefill", "-expired", "2"}, "vkcounter prefill: REDIS_URL or REDIS_CLUSTER is needed"},
		{[]string{"cnt", "-addr", "127.0.0.1:11215", "-dns", "foo:11215", "noop"}, "vkcounter cnt: -addr and -dns both name the servers: give one, not both"},
		{[]string{"cnt", "whit", "x", "0"}, `WINDOW "0", want whole seconds from 1 to 604800 (7 days)`},
		// No community given: the demo community 1 is not named.
		{[]string{"serve", "-vk-mode", "longpoll"}, "vkcounter serve: VK_MODE=longpoll needs VK_GROUP_ID and VK_TOKEN"},
		{[]string{"setup", "-url", "https://b.example/cb"}, "vkcounter setup: VK_GROUP_ID and VK_TOKEN are needed for setup"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := call(tc.args...)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if code != 2 || out != "" || len(lines) != 2 || !strings.Contains(lines[0], tc.want) ||
				!strings.HasPrefix(lines[1], "Run \"vkcounter") || !strings.HasSuffix(lines[1], "-h\" for usage.") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, %q and the -h pointer on stderr", code, out, errOut, tc.want)
			}
		})
	}
	// The bare `loadtest` prints its tool list on stderr, as a usage error.
	if code, out, errOut := call("loadtest"); code != 2 || out != "" || !strings.Contains(errOut, "loadtest callback") {
		t.Errorf("vkcounter loadtest: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestHelpReadsNoSetting: a bad variable does not hide the help, with or
// without the flag that overrides it (the overriding itself:
// internal/config's TestFlagOverridesEnvironment).
func TestHelpReadsNoSetting(t *testing.T) {
	env := map[string]string{"WINDOW": "abc", "NORMALIZE": "maybe"}
	getenv := func(k string) string { return env[k] }
	// The command line, as a user runs it: the bad variable does not hide the help.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-window", "1h", "-h"}, getenv, &out, &errOut); code != 0 || errOut.Len() != 0 || !strings.Contains(out.String(), "WINDOW") {
		t.Fatalf("WINDOW=abc vkcounter -window 1h -h: exit %d, stderr %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{"-h"}, getenv, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("WINDOW=abc vkcounter -h: exit %d, stderr %q; the help reads no setting", code, errOut.String())
	}
}

// TestPlural: counts in messages agree with their nouns.
func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 texts"}, {1, "1 text"}, {2, "2 texts"}} {
		if got := plural(tc.n, "text", "texts"); got != tc.want {
			t.Errorf("plural(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestVersion: `vkcounter version` prints the build information, once.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, func(string) string { return "" }, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if got, want := out.String(), version.Get().String()+"\n"; got != want || !strings.HasPrefix(got, "vkcounter ") {
		t.Fatalf("version printed %q, want %q", got, want)
	}
}
