package redistest

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// StartServer starts a redis-server of the test's own, keeping nothing on
// disk, on a free loopback port with the extra args (e.g.
// "--maxmemory-policy", "allkeys-lru"), and returns its address; it is
// killed when t ends (see startOn: a server restarted on that address is
// killed at the same point of t's cleanups). A test that must reconfigure,
// stall or stop Redis uses one, never the shared servers. Without
// redis-server the test is skipped, or fails when EnvRequire is set.
func StartServer(t testing.TB, args ...string) string {
	t.Helper()
	needServer(t)
	addr, _ := startFresh(t, tcptest.FreeAddr, args...)
	return addr
}

// startFresh starts a redis-server on an address pick gives, as startOn
// does, and returns the address and the process. A port picked free can be
// taken before the server binds it (by any listener of the machine given
// :0): the server then exits, and startFresh tries another.
func startFresh(t testing.TB, pick func(testing.TB) string, args ...string) (string, *exec.Cmd) {
	t.Helper()
	for range 5 {
		addr := pick(t)
		if cmd, ok := tryStartOn(t, addr, args...); ok {
			return addr, cmd
		}
		t.Logf("redistest: redis-server could not serve %s: another process took the port; trying another", addr)
	}
	t.Fatal("redistest: redis-server could not serve any of 5 free ports")
	return "", nil
}

var (
	serversMu sync.Mutex
	servers   = map[string]*exec.Cmd{} // by address: the process now serving it
)

// needServer skips t when redis-server is not installed, or fails it when
// EnvRequire is set.
func needServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("redis-server not found but %s=1", EnvRequire)
		}
		t.Skip("redis-server not installed")
	}
}

// OwnServer starts a redis-server of the test's own as StartServer does,
// with args, and returns it as a Real Target whose Client is opened as
// Open opens one (by redisconn, as the service opens its clients).
func OwnServer(t testing.TB, args ...string) *Target {
	t.Helper()
	addr := StartServer(t, args...)
	u := "redis://" + addr
	return &Target{Kind: Real, Client: open(t, redisconn.Config{URL: u}), Addr: addr, URL: u}
}

// RestartServer stops the server StartServer started on addr at once
// (SHUTDOWN NOSAVE: it keeps nothing) and starts a new, empty one on the
// same address with args, as a Redis without persistence comes back after
// a crash.
func RestartServer(t testing.TB, addr string, args ...string) {
	t.Helper()
	StopServer(t, addr)
	StartServerAt(t, addr, args...)
}

// StopServer stops the server StartServer started on addr at once
// (SHUTDOWN NOSAVE, as a crash of a Redis without persistence) and waits
// until its port is closed; StartServerAt starts it again.
func StopServer(t testing.TB, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("SHUTDOWN NOSAVE\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, c) // until the server closes the connection
	c.Close()
	if !awaitClosed(addr) {
		t.Fatalf("redis-server on %s did not stop", addr)
	}
}

// StartServerAt starts a new, empty redis-server on addr (one StopServer
// stopped), as StartServer does.
func StartServerAt(t testing.TB, addr string, args ...string) {
	t.Helper()
	startOn(t, addr, args...)
}

// startOn starts a redis-server on addr, the process serving addr from
// then on, and waits until it accepts connections. The first server
// started on an address registers the cleanup that kills whichever serves
// it when t ends: a server restarted there (after StopServer, whose
// process it reaps) is killed at the first one's point of t's cleanups,
// after those registered later, such as a service's Close, which then
// still finds Redis up.
func startOn(t testing.TB, addr string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, ok := tryStartOn(t, addr, args...)
	if !ok {
		t.Fatalf("redis-server on %s did not start (or another process listens there)", addr)
	}
	return cmd
}

// tryStartOn is startOn reporting, instead of failing t, when the server
// did not come to serve addr.
func tryStartOn(t testing.TB, addr string, args ...string) (*exec.Cmd, bool) {
	t.Helper()
	serversMu.Lock()
	old, known := servers[addr]
	serversMu.Unlock()
	if known {
		old.Process.Kill() // stopped already: this only reaps it
		old.Wait()
	}
	cmd := launch(t, addr, args...)
	serversMu.Lock()
	servers[addr] = cmd
	serversMu.Unlock()
	if !known {
		t.Cleanup(func() {
			serversMu.Lock()
			cmd := servers[addr]
			delete(servers, addr)
			serversMu.Unlock()
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	return cmd, awaitServing(addr, cmd.Process.Pid)
}

// launch starts a redis-server on addr; the caller kills it.
func launch(t testing.TB, addr string, args ...string) *exec.Cmd {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", append([]string{"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// awaitServing waits, 5 s at most, until the redis-server of process pid
// answers on addr, and reports whether it does: a dial that succeeds may
// reach another process that took the port.
func awaitServing(addr string, pid int) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	want := "\nprocess_id:" + strconv.Itoa(pid) + "\r\n"
	for range 250 {
		if info, err := c.Info(context.Background(), "server").Result(); err == nil {
			return strings.Contains(info, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// awaitClosed dials addr every 20 ms, 250 times at most, until a dial
// fails, and reports whether one did: nothing listens there any more.
func awaitClosed(addr string) bool {
	for range 250 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// PastMaxmemory sets the maxmemory of a server of the test's own
// (OwnServer, StartServer) to half its used_memory, with noeviction, so
// that Redis refuses every write that may take memory (OOM), as a Redis
// that filled up does; it returns a function that lifts the limit again.
func PastMaxmemory(t testing.TB, c redis.UniversalClient) (lift func()) {
	t.Helper()
	ctx := context.Background()
	used := InfoMemory(t, c, "used_memory")
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", strconv.FormatInt(used/2, 10)}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		t.Helper()
		if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// InfoMemory returns the integer field (e.g. "used_memory",
// "used_memory_peak") of the server's INFO memory.
func InfoMemory(t testing.TB, c redis.UniversalClient, field string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, v, ok := strings.Cut(info, "\n"+field+":")
	if !ok {
		t.Fatalf("no %s in INFO memory", field)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]), 10, 64)
	if err != nil {
		t.Fatalf("%s in INFO memory: %v", field, err)
	}
	return n
}

// ManagedProfile are the ACL rules of a managed service's user, as
// ElastiCache, Memorystore and Upstash give one: every command but CONFIG,
// INFO and CLIENT.
var ManagedProfile = []string{"+@all", "-config", "-info", "-client"}

// ACLUser adds the user name with password "pw" and rules (ManagedProfile,
// say) on every key and channel to the server StartServer started on addr,
// and returns a redis:// URL that logs in as it.
func ACLUser(t testing.TB, addr, name string, rules ...string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	args := append([]any{"ACL", "SETUSER", name, "reset", "on", ">pw", "~*", "&*"}, toAny(rules)...)
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	return "redis://" + name + ":pw@" + addr + "/0"
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
