package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/loadtest"
)

// loadReport is the part of `loadtest … -json` the tests read.
type loadReport struct {
	Scenario string           `json:"scenario"`
	Stopped  string           `json:"stopped"`
	Requests int64            `json:"requests"`
	Events   int64            `json:"events"`
	Reposts  int64            `json:"reposts"`
	Errors   int64            `json:"errors"`
	Prefill  float64          `json:"prefill_s"`
	OK       bool             `json:"ok"`
	Latency  []map[string]any `json:"latency"`
	Faults   []struct {
		Fault  string  `json:"fault"`
		Began  float64 `json:"began_s"`
		Ended  float64 `json:"ended_s"`
		Detail string  `json:"detail"`
	} `json:"faults"`
	Check struct {
		Checked  int64            `json:"checked"`
		Problems map[string]int64 `json:"problems"`
		Listed   []any            `json:"listed"`
	} `json:"check"`
}

// runLoad runs `vkcounter loadtest args…` in process and decodes its JSON
// summary.
func runLoad(t *testing.T, args ...string) (int, loadReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"loadtest"}, args...), os.Getenv, &stdout, &stderr)
	var rep loadReport
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("exit %d, stdout is not the JSON summary: %v\n%s\nstderr:\n%s", code, err, stdout.String(), stderr.String())
		}
	}
	return code, rep, stderr.String()
}

func wrongAnswers(rep loadReport) int64 {
	var n int64
	for _, v := range rep.Check.Problems {
		n += v
	}
	return n
}

// TestLoadtestCallbackAgainstProgram runs the callback load tool against
// the whole program (in process) on miniredis and a real Redis: events of
// many texts in flight together, re-posted events, and texts prefilled with
// expired occurrences; every answer must be right. A run that is told a
// shorter window than the program's prefills occurrences the program still
// counts, and the tool must say the answers are wrong.
func TestLoadtestCallbackAgainstProgram(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vkAddr, release := tcptest.Reserve(t)
		a := startApp(t, tg, map[string]string{"VK_API_URL": "http://" + vkAddr + "/method/", "WINDOW": "1h"})
		release() // the load tool's fake VK listens there
		base := []string{"callback", "-url", a.URL("/callback"), "-vk-addr", vkAddr, "-group", strconv.Itoa(servicetest.Group),
			"-secret", servicetest.Secret, "-stats-url", a.AdminURL("/stats"), "-redis", tg.URL, "-key-prefix", a.Prefix, "-json"}

		code, rep, stderr := runLoad(t, append(base, "-texts", "40", "-per-text", "8", "-concurrency", "8",
			"-retry-fraction", "0.1", "-expired", "2")...)
		if code != 0 || !rep.OK || wrongAnswers(rep) != 0 {
			t.Fatalf("exit %d, problems %v %v\n%s", code, rep.Check.Problems, rep.Check.Listed, stderr)
		}
		if rep.Events != 320 || rep.Reposts != 32 || rep.Check.Checked != 320 || rep.Errors != 0 || rep.Prefill <= 0 {
			t.Errorf("events %d reposts %d checked %d errors %d prefill %gs; want 320 32 320 0 >0",
				rep.Events, rep.Reposts, rep.Check.Checked, rep.Errors, rep.Prefill)
		}
		if !strings.Contains(rep.Scenario, "window 1h0m0s") {
			t.Errorf("scenario %q: the window was not read from the program's /stats", rep.Scenario)
		}
		if !strings.Contains(stderr, "VK_API_URL=http://"+vkAddr+"/method/") {
			t.Errorf("no line to start the bot with in:\n%s", stderr)
		}

		code, rep, _ = runLoad(t, append(base, "-texts", "5", "-per-text", "2", "-concurrency", "1", "-expired", "2", "-window", "30m")...)
		if code != 1 || rep.OK || rep.Check.Problems["wrong_number"] != 10 {
			t.Errorf("prefilled inside the program's window: exit %d, problems %v; want exit 1 and all 10 numbers wrong",
				code, rep.Check.Problems)
		}
	}, servicetest.SingleServers...)
}

// TestLoadtestSpawn starts the built program with -spawn: callback runs on
// its embedded Redis and, with expired occurrences, on a Redis given to it,
// and a counter run.
func TestLoadtestSpawn(t *testing.T) {
	bin := program(t)
	tg := redistest.Open(t, redistest.Mini)
	for _, args := range [][]string{
		{"-retry-fraction", "0.25"},
		{"-expired", "1", "-redis", tg.URL, "-key-prefix", redistest.Prefix(t), "-window", "2m"},
	} {
		code, rep, stderr := runLoad(t, append([]string{"callback", "-spawn", "-bin", bin, "-texts", "30", "-per-text", "4", "-json"}, args...)...)
		if code != 0 || !rep.OK || rep.Events != 120 || rep.Check.Checked != 120 {
			t.Fatalf("callback %v: exit %d, events %d checked %d problems %v %v\n%s",
				args, code, rep.Events, rep.Check.Checked, rep.Check.Problems, rep.Check.Listed, stderr)
		}
	}
	report := filepath.Join(t.TempDir(), "counters.html")
	code, rep, stderr := runLoad(t, "counters", "-spawn", "-bin", bin, "-op", "acquire,get,noop,hit,visit,whit,uadd", "-conns", "3",
		"-depth", "8", "-requests", "3000", "-json", "-report", report)
	if code != 0 || !rep.OK || rep.Requests < 2999 || rep.Requests > 3000 || rep.Check.Checked != rep.Requests || len(rep.Latency) != 8 {
		t.Fatalf("counters: exit %d, requests %d checked %d latency %v problems %v %v\n%s",
			code, rep.Requests, rep.Check.Checked, rep.Latency, rep.Check.Problems, rep.Check.Listed, stderr)
	}
	if page, err := os.ReadFile(report); err != nil || !bytes.Contains(page, []byte("<svg")) {
		t.Errorf("HTML report: %v, %d bytes", err, len(page))
	}
}

// TestLoadtestUnderFaults is the short faulted run CI makes: the built
// program on a real Redis, through a Redis stall longer than the webhook
// deadline and the Redis client's timeouts, then a VK outage, with events
// in flight together, re-delivered, and some without event_id. Every
// answer must be right: exact numbers, one messages.send per counted
// message, nothing missing.
func TestLoadtestUnderFaults(t *testing.T) {
	t.Parallel() // mostly waits (its faults' seconds, at 40 events/s): alongside the other waiting tests
	tg := redistest.Open(t, redistest.Real)
	bin := program(t)
	faults := []string{"redis-stall@1s+6s", "vk-down@8s+3s"}
	code, rep, stderr := runLoad(t, "callback", "-spawn", "-bin", bin, "-redis", tg.URL, "-key-prefix", redistest.Prefix(t),
		"-window", "2m", "-texts", "30", "-per-text", "8", "-rate", "40", "-concurrency", "8", "-retry-fraction", "0.1",
		"-no-event-id", "0.2", "-faults", strings.Join(faults, ","), "-json")
	if code != 0 || !rep.OK || wrongAnswers(rep) != 0 {
		t.Fatalf("exit %d, problems %v\n%v\nstderr:\n%s", code, rep.Check.Problems, rep.Check.Listed, stderr)
	}
	if rep.Events != 240 || rep.Check.Checked != 240 {
		t.Errorf("events %d, checked %d; want 240 each", rep.Events, rep.Check.Checked)
	}
	if len(rep.Faults) != len(faults) {
		t.Fatalf("faults %+v, want %v", rep.Faults, faults)
	}
	for i, f := range rep.Faults {
		if f.Fault != faults[i] || f.Began <= 0 || f.Ended <= f.Began {
			t.Errorf("fault %d: %+v, want %s applied", i, f, faults[i])
		}
	}
}

func TestLoadtestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no tool", nil, 2, "Usage"},
		{"unknown tool", []string{"nope"}, 2, "unknown tool"},
		{"neither url nor spawn", []string{"callback"}, 2, "-url or -spawn"},
		{"both url and spawn", []string{"callback", "-url", "http://127.0.0.1:1/", "-spawn"}, 2, "-url or -spawn"},
		{"stray argument", []string{"counters", "extra"}, 2, "unexpected argument"},
		{"unknown workload", []string{"counters", "-op", "burn"}, 2, "burn"},
		{"remote webhook", []string{"callback", "-url", "http://10.1.2.3/callback"}, 2, "loopback"},
		{"remote redis", []string{"callback", "-url", "http://127.0.0.1:1/", "-redis", "redis://10.1.2.3:6379"}, 2, "loopback"},
		{"remote counters", []string{"counters", "-addr", "10.1.2.3:11215"}, 2, "loopback"},
		{"remote counters in a list", []string{"counters", "-addr", "127.0.0.1:1,10.1.2.3:11215"}, 2, "loopback"},
		{"bad address in a list", []string{"counters", "-addr", "127.0.0.1:1,nope"}, 2, "want HOST:PORT"},
		{"max without acquire", []string{"counters", "-addr", "127.0.0.1:1", "-op", "hit", "-max", "3"}, 2, "-op acquire alone"},
		{"max beyond 4 bytes", []string{"counters", "-addr", "127.0.0.1:1", "-max", "4294967296"}, 2, "4 bytes"},
		{"expired without redis", []string{"callback", "-url", "http://127.0.0.1:1/", "-expired", "1"}, 2, "-redis"},
		{"counters without a target", []string{"counters", "-op", "noop"}, 2, "give -addr HOST:PORT or -spawn"},
		{"counters with both targets", []string{"counters", "-addr", "127.0.0.1:1", "-spawn"}, 2, "give -addr HOST:PORT or -spawn"},
		{"requests 0 without a duration", []string{"counters", "-addr", "127.0.0.1:1", "-requests", "0"}, 2, "give -duration too"},
		{"bad duration", []string{"counters", "-addr", "127.0.0.1:1", "-duration", "10"}, 2, "want a Go duration such as"},
		{"bad fault", []string{"callback", "-url", "http://127.0.0.1:1/", "-faults", "redis-melt@1s+1s"}, 2, "unknown kind"},
		{"fault without duration", []string{"callback", "-url", "http://127.0.0.1:1/", "-faults", "vk-down@1s"}, 2, "START+DURATION"},
		{"overlapping faults", []string{"callback", "-url", "http://127.0.0.1:1/", "-faults", "vk-down@1s+5s,vk-hang@2s+1s"}, 2, "overlap"},
		{"redis fault, embedded redis", []string{"callback", "-spawn", "-faults", "redis-stall@1s+1s"}, 2, "-redis"},
		{"redis fault, cluster", []string{"callback", "-url", "http://127.0.0.1:1/", "-redis-cluster", "127.0.0.1:7000", "-faults", "redis-stall@1s+1s"}, 2, "-redis"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runLoadtest(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q on stderr only", code, stdout.String(), stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestLoadtestCountersForADuration: -requests 0 with -duration sends until
// the duration ends, more than any fixed count would need to be guessed.
func TestLoadtestCountersForADuration(t *testing.T) {
	addr := counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	code, rep, stderr := runLoad(t, "counters", "-addr", addr, "-op", "noop", "-requests", "0", "-duration", "300ms", "-json")
	if code != 0 || !rep.OK || rep.Stopped != "duration" || rep.Requests == 0 {
		t.Fatalf("exit %d, stopped %q after %d requests; want exit 0, stopped by the duration\n%s", code, rep.Stopped, rep.Requests, stderr)
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress rewrote a terminal line on a non-terminal: %q", stderr)
	}
}

// TestLoadtestCountersSharedMaximum: -max across two instances that keep
// their own counters finds grants beyond the maximum and exits 1.
func TestLoadtestCountersSharedMaximum(t *testing.T) {
	a := counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	b := counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	code, rep, stderr := runLoad(t, "counters", "-addr", a+","+b, "-op", "acquire", "-max", "1", "-names", "1",
		"-conns", "4", "-requests", "0", "-duration", "300ms", "-json") // long enough for the connections to interleave (loadtest's splitRun)
	if code != 1 || rep.OK || rep.Check.Problems["over_maximum"] == 0 {
		t.Fatalf("exit %d, report ok %v, problems %v; want exit 1 with over_maximum\n%s", code, rep.OK, rep.Check.Problems, stderr)
	}
}

// TestLoadtestExpiredTrims: with a KEY_PREFIX of its own and NORMALIZE on
// (the run's texts change under normalisation), the load tool's prefill
// writes the very keys the spawned bot reads, and the bot's counting trims
// the expired occurrences: each text ends with one key holding its run's
// events alone. A prefill that missed the bot's keys would leave a second
// key per text holding the expired occurrences.
func TestLoadtestExpiredTrims(t *testing.T) {
	bin := program(t)
	tg := redistest.Open(t, redistest.Real)
	prefix := redistest.Prefix(t) + "own:"
	code, rep, stderr := runLoad(t, "callback", "-spawn", "-bin", bin, "-redis", tg.URL, "-key-prefix", prefix, "-normalize",
		"-window", "2m", "-texts", "5", "-per-text", "2", "-expired", "3", "-json")
	if code != 0 || !rep.OK || rep.Check.Checked != 10 || rep.Prefill <= 0 {
		t.Fatalf("exit %d, checked %d, prefill %gs, problems %v %v\n%s", code, rep.Check.Checked, rep.Prefill, rep.Check.Problems, rep.Check.Listed, stderr)
	}
	texts, err := tg.Client.Keys(t.Context(), freq.KeyPattern(prefix)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != 5 {
		t.Fatalf("%d counting keys %q, want one per text (5)", len(texts), texts)
	}
	for _, k := range texts {
		if n, err := freq.Held(t.Context(), tg.Client, k); err != nil || n != 2 {
			t.Errorf("%q holds %d (%v), want 2: the 3 expired occurrences trimmed", k, n, err)
		}
	}
}

// TestLoadtestSpawnKeepsOffServiceKeys: a -spawn run against a Redis a
// service uses writes under its own prefix, never under the service's
// default one, unless -key-prefix says so.
func TestLoadtestSpawnKeepsOffServiceKeys(t *testing.T) {
	bin := program(t)
	tg := redistest.OwnServer(t) // this test's own server: it lists every key
	code, rep, stderr := runLoad(t, "callback", "-spawn", "-bin", bin, "-redis", tg.URL, "-texts", "3", "-per-text", "2", "-json")
	if code != 0 || !rep.OK {
		t.Fatalf("exit %d, problems %v\n%s", code, rep.Check.Problems, stderr)
	}
	keys, err := tg.Client.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("the run stored nothing")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, loadtest.SpawnKeyPrefix) {
			t.Errorf("key %q is outside %q", k, loadtest.SpawnKeyPrefix)
		}
	}
}

// TestPrefillCommand runs `vkcounter prefill` as a user would: the texts
// on stdin, the service's settings in the environment; a text stored
// twice for NORMALIZE is one identity.
func TestPrefillCommand(t *testing.T) {
	bin := program(t)
	tg := redistest.Open(t, redistest.Real)
	prefix := redistest.Prefix(t)
	cmd := exec.Command(bin, "prefill", "-expired", "2")
	cmd.Env = append(os.Environ(), "REDIS_URL="+tg.URL, "REDIS_CLUSTER=", "KEY_PREFIX="+prefix, "NORMALIZE=true", "VK_GROUP_ID=7", "VK_GROUPS=", "WINDOW=1m")
	cmd.Stdin = strings.NewReader("Hello  World\nhello world\nother\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stored 2 expired occurrences of each of 3 texts") {
		t.Fatalf("prefill: %v\n%s", err, out)
	}
	texts, err := tg.Client.Keys(t.Context(), freq.KeyPattern(prefix)).Result()
	if err != nil || len(texts) != 2 {
		t.Fatalf("counting keys %q (%v), want 2: the first two texts are one identity", texts, err)
	}
	cmd = exec.Command(bin, "prefill", "-expired", "0")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "-expired 0") {
		t.Errorf("prefill -expired 0: %v\n%s", err, out)
	}
}

// TestLoadtestFlagValues: a flag value out of range is a usage error found
// before anything starts: exit 2, one line naming the flag as typed (with
// one prefix), the -h pointer, nothing on stdout. 0 is refused where it
// would mean nothing (the loadtest package would take its default), and
// taken where the help gives it a meaning.
func TestLoadtestFlagValues(t *testing.T) {
	// A -spawn that got as far as starting the service would fail with exit 1.
	missing := filepath.Join(t.TempDir(), "no-such-vkcounter")
	cb := func(args ...string) []string { return append([]string{"callback", "-spawn", "-bin", missing}, args...) }
	ct := func(args ...string) []string { return append([]string{"counters", "-spawn", "-bin", missing}, args...) }
	for _, tc := range []struct {
		args []string
		want string // the first line of stderr, after "vkcounter loadtest TOOL: "
	}{
		{ct("-conns", "-3", "-requests", "10"), "-conns -3: must be at least 1"},
		{ct("-conns", "0"), "-conns 0: must be at least 1"},
		{ct("-conns", "10001"), "-conns 10001: must be at most 10000"},
		{ct("-depth", "0"), "-depth 0: must be at least 1"},
		{ct("-depth", "100001"), "-depth 100001: must be at most 100000"},
		{ct("-names", "0"), "-names 0: must be at least 1"},
		{ct("-requests", "-1"), "-requests -1: must not be negative"},
		{ct("-duration", "-1s"), "-duration -1s: must not be negative"},
		{ct("-timeout", "0"), "-timeout 0s: must be more than 0"},
		{ct("-op", "burn"), `-op: unknown counter workload "burn" (want acquire, get, noop, hit, visit, whit or uadd)`},
		{ct("-op", "acquire,acquire", "-max", "2"), "-max checks the acquire workload: give -op acquire alone"},
		{[]string{"counters", "-addr", "10.1.2.3:11215"}, "-addr: 10.1.2.3 is not on this machine's loopback; give -allow-remote to load another machine"},
		{cb("-texts", "-5", "-per-text", "1", "-duration", "3s"), "-texts -5: must be at least 1"},
		{cb("-texts", "0"), "-texts 0: must be at least 1"},
		{cb("-per-text", "0"), "-per-text 0: must be at least 1"},
		{cb("-texts", "2000", "-per-text", "1000"), "-texts 2000 × -per-text 1000 = 2000000 events: at most 1048576 in a run"},
		{cb("-peers", "-1"), "-peers -1: must not be negative"},
		{cb("-concurrency", "0"), "-concurrency 0: must be at least 1"},
		{cb("-group", "0"), "-group 0: must be at least 1"},
		{cb("-rate", "-1"), "-rate -1: must not be negative"},
		{cb("-rate", "NaN"), "-rate NaN: want a number such as 20 or 2.5"},
		{cb("-retry-fraction", "2"), "-retry-fraction 2: must be between 0 and 1"},
		{cb("-no-event-id", "1.5"), "-no-event-id 1.5: must be between 0 and 1"},
		{cb("-expired", "-1"), "-expired -1: must not be negative"},
		{cb("-window", "1500ms"), "-window 1.5s: must be whole seconds"},
		{cb("-wait", "-1s"), "-wait -1s: must not be negative"},
		{cb("-timeout", "0s"), "-timeout 0s: must be more than 0"},
		{cb("-reply-timeout", "0s"), "-reply-timeout 0s: must be more than 0"},
		{cb("-attempts", "0"), "-attempts 0: must be at least 1"},
		{cb("-vk-addr", "nowhere"), `-vk-addr "nowhere": want HOST:PORT such as 127.0.0.1:0`},
		{[]string{"callback", "-url", "http://10.1.2.3/callback"}, "-url: 10.1.2.3 is not on this machine's loopback; give -allow-remote to load another machine"},
		{[]string{"callback", "-url", "127.0.0.1:8080/callback"}, `-url "127.0.0.1:8080/callback": want an http:// or https:// URL`},
		{[]string{"callback", "-url", "http://127.0.0.1:1/", "-stats-url", "http://10.1.2.3/stats"}, "-stats-url: 10.1.2.3 is not on this machine's loopback; give -allow-remote to load another machine"},
		{[]string{"callback", "-url", "http://127.0.0.1:1/", "-redis", "redis://10.1.2.3:6379"}, "-redis: 10.1.2.3 is not on this machine's loopback; give -allow-remote to load another machine"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runLoadtest(context.Background(), tc.args, &stdout, &stderr)
			tool := "vkcounter loadtest " + tc.args[0]
			want := tool + ": " + tc.want + "\nRun \"" + tool + " -h\" for usage.\n"
			if code != exitUsage || stdout.Len() != 0 || stderr.String() != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and stderr %q", code, stdout.String(), stderr.String(), want)
			}
		})
	}

	// The zeros that mean something pass the checks: the run gets as far
	// as starting the (missing) service.
	for _, args := range [][]string{
		cb("-rate", "0", "-peers", "0", "-expired", "0", "-duration", "0", "-window", "0", "-wait", "0"),
		ct("-requests", "0", "-duration", "1s", "-max", "0"),
	} {
		var stdout, stderr bytes.Buffer
		code := runLoadtest(context.Background(), args, &stdout, &stderr)
		if code != exitFailure || !strings.Contains(stderr.String(), "spawn") || strings.Contains(stderr.String(), "loadtest: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 from starting %s", args, code, stderr.String(), missing)
		}
	}

	// The help gives the real defaults and what each meaningful 0 means.
	var help bytes.Buffer
	runLoadtest(context.Background(), []string{"callback", "-h"}, &help, io.Discard)
	for _, want := range []string{"distinct texts (default 300)", "events per text (default 10)", "requests in flight (default 10)",
		"0 = as fast as possible", "0 = one per event", "0 = none", "0 = it must answer at once", "0 = when every event is posted"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("loadtest callback -h lacks %q", want)
		}
	}
	help.Reset()
	runLoadtest(context.Background(), []string{"counters", "-h"}, &help, io.Discard)
	for _, want := range []string{"connections (at most 10000) (default 1)", "(pipelining; at most 100000) (default 1)", "0 = no limit, run for -duration"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("loadtest counters -h lacks %q", want)
		}
	}
}

// TestLoadtestURLNeedsAWiredBot: `loadtest callback -url` prints on stdout
// the service to start, and against a service that answers the webhook
// but never sends its replies to the tool's fake VK API (the README's demo
// in dry-run; a service with another VK_API_URL) it fails before the run,
// saying why, rather than reporting every answer wrong.
func TestLoadtestURLNeedsAWiredBot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"dry-run", map[string]string{"VK_TOKEN": ""}, "it is in dry-run (its /stats says dry_run: it has no VK_TOKEN): it logs its replies and never calls the fake VK API at"},
		{"another VK_API_URL", nil, "its reply to a probe message never reached the fake VK API at"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, nil, tt.env)
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"loadtest", "callback", "-url", a.URL("/callback"), "-stats-url", a.AdminURL("/stats"),
				"-group", strconv.Itoa(servicetest.Group), "-secret", servicetest.Secret, "-texts", "3000", "-per-text", "1", "-wait", "1s"}, os.Getenv, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "start the bot with the settings printed above") {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.want)
			}
			if out := stdout.String(); !strings.Contains(out, "start the bot with:\n  ") || !strings.Contains(out, " ./vkcounter serve\n") ||
				!strings.Contains(out, "VK_API_URL=http://127.0.0.1:") || strings.Contains(out, "wrong answer") {
				t.Errorf("stdout %q: want the line to start the bot with, and no report", out)
			}
			if n := len(a.VK.Sends()); n > 1 {
				t.Errorf("the service sent %d replies to its own VK: the run went on", n)
			}
		})
	}
}

// TestLoadtestLongPollAgainstProgram runs the load tool in long-poll mode
// against the whole program: every answer must be right, in the order of
// each text's events.
func TestLoadtestLongPollAgainstProgram(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vkAddr, release := tcptest.Reserve(t)
		a := startApp(t, tg, map[string]string{"VK_API_URL": "http://" + vkAddr + "/method/", "VK_MODE": config.ModeLongPoll, "LONGPOLL_WAIT": "1s"})
		release() // the load tool's fake VK listens there
		code, rep, stderr := runLoad(t, "callback", "-longpoll", "-vk-addr", vkAddr, "-group", strconv.Itoa(servicetest.Group),
			"-stats-url", a.AdminURL("/stats"), "-texts", "40", "-per-text", "8", "-json")
		if code != 0 || !rep.OK || wrongAnswers(rep) != 0 || rep.Events != 320 || rep.Check.Checked != 320 {
			t.Fatalf("exit %d, events %d checked %d problems %v %v\n%s", code, rep.Events, rep.Check.Checked, rep.Check.Problems, rep.Check.Listed, stderr)
		}
		if !strings.Contains(rep.Scenario, "Long Poll") {
			t.Errorf("scenario %q does not say long poll", rep.Scenario)
		}
	}, redistest.Real)
}
