package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// cntServer serves a counter port on loopback for the test and returns its
// address and a client of it.
func cntServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	return cntServerWith(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
}

// cntServerWith is cntServer with options.
func cntServerWith(t *testing.T, opts counters.ServerOptions) (string, *client.Client) {
	t.Helper()
	addr := counterstest.Start(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return addr, c
}

func cnt(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runCnt(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCnt(t *testing.T) {
	addr, watcher := cntServer(t)
	ctx := context.Background()
	if _, err := watcher.Acquire(ctx, "seen", 4, 10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"noop", []string{"noop"}, 0, "OK\n", ""},
		{"commands in one session", []string{"acquire", "jobs", "2", "5", "get", "jobs", "release", "jobs", "2", "get", "jobs"},
			0, "2\n2\nOK\n0\n", ""},
		{"get", []string{"get", "seen"}, 0, "4\n", ""},
		{"error answer", []string{"get", "missing"}, 1, "", "ERROR: 01 Not found\n"},
		{"stops at the first error", []string{"acquire", "seen", "7", "10", "noop"}, 1, "", "ERROR: 21 Resource not available\n"},
		{"release not held", []string{"release", "seen", "1"}, 1, "", "ERROR: 22 Not acquired\n"},
		{"dump", []string{"dump"}, 0, "0 2 jobs\n4 4 seen\n", ""},
		{"invalid acquire refused locally", []string{"acquire", "x", "0", "1"}, 2, "", `acquire ["x" "0" "1"]: invalid arguments: resources is 0`},
		{"a bad command runs none", []string{"acquire", "jobs", "1", "5", "release", "x", "1", "acquire", "y", "2", "1"}, 2, "", "maximum 1 is less than resources 2"},
		{"no command", nil, 2, "", "no command"},
		{"unknown command", []string{"frob"}, 2, "", `unknown command "frob"`},
		{"missing arguments", []string{"acquire", "x", "1"}, 2, "", "acquire needs 3 arguments: acquire NAME RESOURCES MAXIMUM (e.g. acquire jobs 1 10)"},
		{"bad number", []string{"release", "x", "-1"}, 2, "", `RESOURCES "-1": want a whole number from 0 to 4294967295, such as 10`},
		{"number too big", []string{"acquire", "x", "1", "4294967296"}, 2, "", "MAXIMUM"},
		{"help", []string{"-h"}, 0, "acquire NAME RESOURCES MAXIMUM", ""},
		{"bad flag", []string{"-nope"}, 2, "", "flag provided but not defined: -nope\nRun \"vkcounter cnt -h\" for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "help" && tc.name != "bad flag" {
				args = append([]string{"-addr", addr}, args...)
			}
			code, stdout, stderr := cnt(t, ctx, args...)
			if tc.name == "dump" {
				stdout = sortLines(stdout)
			}
			if tc.name == "help" { // the whole usage on stdout, nothing on stderr
				if code != 0 || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stdout, "-hold") || stderr != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
				}
				return
			}
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q",
					code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// sortLines sorts the lines of s, for output in no particular order.
func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func TestCntStats(t *testing.T) {
	addr, _ := cntServer(t)
	code, stdout, _ := cnt(t, context.Background(), "-addr", addr, "stats")
	lines := strings.Split(stdout, "\n")
	if code != 0 || len(lines) < 16 || lines[0] != "objects 0" || !strings.HasPrefix(lines[14], "command:dump ") {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
}

func TestCntConnectionRefused(t *testing.T) {
	addr := tcptest.FreeAddr(t)
	code, _, stderr := cnt(t, context.Background(), "-addr", addr, "noop")
	if code != 1 || !strings.Contains(stderr, "cannot connect") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// One line, naming the package once.
	if want := "vkcounter cnt: noop: counters: cannot connect to " + addr + ": dial tcp "; !strings.HasPrefix(stderr, want) ||
		strings.Count(stderr, "counters:") != 1 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stderr %q, want one line starting %q", stderr, want)
	}
}

// TestCntServerFlags: -addr and -dns are two ways to name the servers;
// both given, or either malformed, is a usage error and nothing is sent.
func TestCntServerFlags(t *testing.T) {
	addr, _ := cntServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"both", []string{"-addr", addr, "-dns", "foo:11215", "noop"}, 2, "vkcounter cnt: -addr and -dns both name the servers: give one, not both\n"},
		{"both, -addr at its default", []string{"-addr", "127.0.0.1:11215", "-dns", addr, "noop"}, 2, "give one, not both"},
		{"dns without a port", []string{"-dns", "foo", "noop"}, 2, `vkcounter cnt: -dns "foo": want HOST:PORT`},
		{"dns without a host", []string{"-dns", ":11215", "noop"}, 2, `vkcounter cnt: -dns ":11215": want HOST:PORT`},
		{"addr twice", []string{"-addr", addr + "," + addr, "noop"}, 2, "listed twice"},
		{"addr empty", []string{"-addr", "", "noop"}, 2, "empty server address"},
		{"negative vnodes", []string{"-addr", addr, "-vnodes", "-1", "noop"}, 2, "-vnodes -1: want 0"},
		{"dns alone", []string{"-dns", addr, "noop"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cnt(t, ctx, tc.args...)
			wantOut := ""
			if tc.code == 0 {
				wantOut = "OK\n"
			}
			if code != tc.code || stdout != wantOut || !strings.Contains(stderr, tc.stderr) ||
				(tc.code == 2 && !strings.HasSuffix(stderr, "Run \"vkcounter cnt -h\" for usage.\n")) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", code, stdout, stderr, tc.code, wantOut, tc.stderr)
			}
		})
	}
	// A name that does not resolve is blamed, not the default -addr.
	code, _, stderr := cnt(t, ctx, "-dns", "nosuchhost.invalid:11215", "-timeout", "3s", "noop")
	if code != 1 || !strings.Contains(stderr, "nosuchhost.invalid") || strings.Contains(stderr, "127.0.0.1:11215") {
		t.Fatalf("unresolvable -dns: exit %d, stderr %q; want 1, naming the -dns name only", code, stderr)
	}
}

// TestCntWindowInSeconds: WINDOW is typed in seconds, and its errors say
// seconds too, as the help does.
func TestCntWindowInSeconds(t *testing.T) {
	for _, w := range []string{"0", "604801", "1h", "-5", "1.5"} {
		code, stdout, stderr := cnt(t, context.Background(), "-addr", "127.0.0.1:1", "wcount", "api", w)
		want := fmt.Sprintf(`WINDOW %q, want whole seconds from 1 to 604800 (7 days), such as 3600`, w)
		if code != 2 || stdout != "" || !strings.Contains(stderr, want) || strings.Contains(stderr, "168h") {
			t.Errorf("wcount api %s: exit %d, stdout %q, stderr %q; want 2 and %q", w, code, stdout, stderr, want)
		}
	}
}

// cntResult is what a cnt run returned and printed.
type cntResult struct {
	code           int
	stdout, stderr string
}

// holdLock runs `cnt -hold acquire lock 1 1` against addr, with flags
// added, until ctx ends or cnt returns, and delivers its result. Its stderr
// can be read while it runs: "holding" is there once the acquire was
// answered.
func holdLock(ctx context.Context, addr string, flags ...string) (<-chan cntResult, *syncbuf.Buffer) {
	done := make(chan cntResult, 1)
	var errOut syncbuf.Buffer
	args := append(append([]string{"-addr", addr}, flags...), "-hold", "acquire", "lock", "1", "1")
	go func() {
		var out bytes.Buffer
		code := runCnt(ctx, args, &out, &errOut)
		done <- cntResult{code, out.String(), errOut.String()}
	}()
	return done, &errOut
}

// TestCntHold: with -hold the acquired resources stay held until the
// context ends (the interrupt), then are released.
func TestCntHold(t *testing.T) {
	addr, watcher := cntServer(t)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done, _ := holdLock(ctx, addr)
	get := func() uint32 {
		v, _ := watcher.Get(context.Background(), "lock")
		return v
	}
	eventually.True(t, 5*time.Second, "resource held", func() bool { return get() == 1 })
	select {
	case r := <-done:
		t.Fatalf("cnt -hold returned before the interrupt: %+v", r)
	default:
	}
	if _, err := watcher.Acquire(context.Background(), "lock", 1, 1); err == nil {
		t.Fatal("a held resource was acquired again")
	}
	interrupt()
	r := <-done
	if r.code != 0 || r.stdout != "1\n" || !strings.Contains(r.stderr, "holding") {
		t.Fatalf("cnt -hold: %+v", r)
	}
	eventually.True(t, 5*time.Second, "resource released", func() bool { return get() == 0 })
}

// TestCntHoldOutlivesTimeout: -timeout bounds the commands, not the hold:
// well past it the resource is still held, until the interrupt.
func TestCntHoldOutlivesTimeout(t *testing.T) {
	addr, watcher := cntServer(t)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	const timeout = 300 * time.Millisecond
	start := time.Now()
	done, errOut := holdLock(ctx, addr, "-timeout", timeout.String())
	eventually.True(t, 5*time.Second, "cnt holding", func() bool { return strings.Contains(errOut.String(), "holding") })
	select {
	case r := <-done:
		t.Fatalf("cnt -timeout %v -hold returned before the interrupt: %+v", timeout, r)
	case <-time.After(time.Until(start.Add(4 * timeout))):
	}
	if v, err := watcher.Get(context.Background(), "lock"); err != nil || v != 1 {
		t.Fatalf("%v after cnt -timeout %v -hold started: Get = %d, %v; want 1 still held", time.Since(start), timeout, v, err)
	}
	interrupt()
	r := <-done
	if r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("cnt -timeout %v -hold: %+v", timeout, r)
	}
}

// TestCntHoldServerGone: when the server goes away while cnt -hold holds
// resources, cnt says the connection is lost and exits 1: nobody may
// believe the resources are still held.
func TestCntHoldServerGone(t *testing.T) {
	srv := counterstest.NewServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := counterstest.Listen(t, srv)
	watcher, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	done, errOut := holdLock(context.Background(), addr)
	eventually.True(t, 5*time.Second, "resource held", func() bool {
		v, _ := watcher.Get(context.Background(), "lock")
		return v == 1
	})
	// The server counts the acquire before its answer is flushed: closing
	// it before cnt has the answer would lose the acquire, not the hold.
	eventually.True(t, 5*time.Second, "cnt holding", func() bool { return strings.Contains(errOut.String(), "holding") })
	srv.Close()
	select {
	case r := <-done:
		if r.code != 1 || r.stdout != "1\n" || !strings.Contains(r.stderr, "connection lost; nothing is held any more") {
			t.Fatalf("cnt -hold after the server stopped: %+v; want exit 1 and the error", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cnt -hold did not notice the server going away")
	}
}

func TestCntExtension(t *testing.T) {
	addr, watcher := cntServer(t)
	ctx := context.Background()
	long := strings.Repeat("n", 256)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"total never hit", []string{"total", "pages"}, 1, "", "ERROR: 01 Not found\n"},
		{"hit and total", []string{"hit", "pages", "hit", "pages", "total", "pages"}, 0, "1\n2\n2\n", ""},
		{"add", []string{"add", "pages", "5", "total", "pages"}, 0, "7\n7\n", ""},
		{"add 0 refused locally", []string{"add", "pages", "0"}, 2, "", `N "0": want a whole number from 1 to`},
		{"add not a number", []string{"add", "pages", "x"}, 2, "", `N "x"`},
		{"add beyond int64", []string{"add", "pages", "9223372036854775808"}, 2, "", "N"},
		{"visits", []string{"visit", "room", "u1", "300", "visit", "room", "u1", "300", "visit", "room", "u2", "0", "active", "room", "300"},
			0, "1 1\n1 0\n2 1\n2\n", ""},
		{"leaves", []string{"leave", "room", "u1", "leave", "room", "u1", "active", "room", "0"}, 0, "1 1\n1 0\n1\n", ""},
		{"name over the store's limit refused locally", []string{"hit", long}, 2, "", "name: length 256, want 1 to 255 bytes"},
		{"empty key refused locally", []string{"visit", "room", "", "0"}, 2, "", "invalid arguments"},
		{"empty name refused locally", []string{"hit", "pages", "hit", ""}, 2, "", "invalid arguments"},
		{"missing arguments", []string{"visit", "room", "k"}, 2, "", "visit needs 3 arguments"},
		{"bad timeout", []string{"active", "room", "-1"}, 2, "", `TIMEOUT "-1": want a whole number`},
		{"timeout too big", []string{"visit", "room", "k", "4294967296"}, 2, "", "TIMEOUT"},
		{"help lists them", []string{"-h"}, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "help lists them" {
				args = append([]string{"-addr", addr}, args...)
			}
			code, stdout, stderr := cnt(t, ctx, args...)
			if tc.name == "help lists them" {
				if code != 0 || !strings.Contains(stdout, "visit NAME KEY TIMEOUT") || stderr != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
				}
				return
			}
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q",
					code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	if n, err := watcher.Total(ctx, "pages"); n != 7 || err != nil {
		t.Fatalf("Total after the commands = %d, %v", n, err)
	}
}

// brokenStore fails every call, as a store whose Redis is down.
type brokenStore struct{}

var errBroken = errors.New("redis: connection refused")

func (brokenStore) Hit(context.Context, string) (int64, error)   { return 0, errBroken }
func (brokenStore) Total(context.Context, string) (int64, error) { return 0, errBroken }
func (brokenStore) Add(context.Context, string, int64) (int64, error) {
	return 0, errBroken
}

func TestCntStoreFailure(t *testing.T) {
	stores := counters.MemoryStores(nil)
	stores.Access = brokenStore{}
	addr, _ := cntServerWith(t, counters.ServerOptions{Stores: stores})
	code, stdout, stderr := cnt(t, context.Background(), "-addr", addr, "hit", "x", "noop")
	if code != 1 || stdout != "" || stderr != "ERROR: 86 Store unavailable\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// checkOnOwnerOnly checks that the counter n is on its owner in ring
// alone, at total, asking each server (watchers, by address).
func checkOnOwnerOnly(ctx context.Context, t *testing.T, ring *client.Ring, watchers map[string]*client.Client, n string, total int64) {
	t.Helper()
	owner := ring.Owner(n)
	if v, err := watchers[owner].Total(ctx, n); v != total || err != nil {
		t.Fatalf("%q on its owner %s: %d, %v", n, owner, v, err)
	}
	for a, w := range watchers {
		if _, err := w.Total(ctx, n); a != owner && err == nil {
			t.Fatalf("%q also on %s", n, a)
		}
	}
}

// TestCntRing: with several servers named commands go to the name's owner
// and noop, stats and dump to every server, each line prefixed with it.
func TestCntRing(t *testing.T) {
	var addrs []string
	watchers := map[string]*client.Client{}
	for range 3 {
		addr, w := cntServer(t)
		addrs = append(addrs, addr)
		watchers[addr] = w
	}
	ring, err := client.NewRing(addrs, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list := strings.Join(addrs, ",")
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var args []string
	for _, n := range names {
		args = append(args, "acquire", n, "1", "5", "add", n, "3", "release", n, "1")
	}
	code, stdout, stderr := cnt(t, ctx, append([]string{"-addr", list}, args...)...)
	if code != 0 || stdout != strings.Repeat("1\n3\nOK\n", len(names)) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, n := range names {
		checkOnOwnerOnly(ctx, t, ring, watchers, n, 3)
	}
	// The acquires were released, so dump lists every name at 0, each on
	// its owner's line.
	code, stdout, _ = cnt(t, ctx, "-addr", list, "noop", "dump")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var want []string
	for _, a := range ring.Servers() {
		want = append(want, a+" OK")
	}
	var dumps []string
	for _, n := range names {
		dumps = append(dumps, ring.Owner(n)+" 0 1 "+n)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if got := strings.Join(lines[:3], "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("noop lines:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	got := lines[3:]
	sort.Strings(got)
	sort.Strings(dumps)
	if strings.Join(got, "\n") != strings.Join(dumps, "\n") {
		t.Fatalf("dump lines:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(dumps, "\n"))
	}
	code, stdout, _ = cnt(t, ctx, "-addr", list, "stats")
	for _, a := range addrs {
		if code != 0 || !strings.Contains(stdout, a+" objects ") || !strings.Contains(stdout, a+" command:dump 1") {
			t.Fatalf("stats of %s missing: exit %d\n%s", a, code, stdout)
		}
	}
}

func TestCntKinds(t *testing.T) {
	addr, _ := cntServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"window hits and count", []string{"whit", "api", "3600", "whit", "api", "3600", "wcount", "api", "3600", "wcount", "api", "60"},
			0, "0\n1\n2\n0\n", ""},
		{"window 0 refused locally", []string{"whit", "api", "0"}, 2, "", "invalid arguments"},
		{"window over 7 days refused locally", []string{"wcount", "api", "604801"}, 2, "", "invalid arguments"},
		{"window not a number", []string{"whit", "api", "1h"}, 2, "", `WINDOW "1h"`},
		{"unique count never added", []string{"ucount", "visitors"}, 1, "", "ERROR: 01 Not found\n"},
		{"unique adds and count", []string{"uadd", "visitors", "alice", "uadd", "visitors", "alice", "uadd", "visitors", "bob", "ucount", "visitors"},
			0, "1\n0\n1\n2\n", ""},
		{"unique union", []string{"uadd", "others", "carol", "ucount", "visitors,others"}, 0, "1\n3\n", ""},
		{"unique empty name in a union refused locally", []string{"ucount", "visitors,"}, 2, "", "invalid arguments"},
		{"unique empty key refused locally", []string{"uadd", "visitors", ""}, 2, "", "invalid arguments"},
		{"list by prefix", []string{"add", "page_b", "2", "hit", "page_a", "hit", "other", "list", "page_"}, 0, "2\n1\n1\n1 page_a\n2 page_b\n", ""},
		{"list everything", []string{"list", ""}, 0, "1 other\n1 page_a\n2 page_b\n", ""},
		{"list prefix too long", []string{"list", strings.Repeat("p", 256)}, 2, "", "invalid arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cnt(t, ctx, append([]string{"-addr", addr}, tc.args...)...)
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q",
					code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
