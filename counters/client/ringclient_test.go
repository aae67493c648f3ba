package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// ringOf starts n servers and returns their addresses and servers.
func ringOf(t *testing.T, n int) ([]string, map[string]*counters.Server) {
	t.Helper()
	var addrs []string
	servers := map[string]*counters.Server{}
	for range n {
		s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
		addr := listen(t, s)
		addrs = append(addrs, addr)
		servers[addr] = s
	}
	return addrs, servers
}

func newRingClient(t *testing.T, addrs []string, opts client.RingOptions) *client.RingClient {
	t.Helper()
	rc, err := client.NewRingClient(ctx(t), addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// TestRingClientRoutesToOwner acquires 60 names through the ring and
// checks, on each server directly, that exactly the names it owns are
// there, then reads every server's stats and dump through Each.
func TestRingClientRoutesToOwner(t *testing.T) {
	addrs, _ := ringOf(t, 3)
	rc := newRingClient(t, addrs, client.RingOptions{})
	ring, err := client.NewRing(addrs, 0)
	if err != nil {
		t.Fatal(err)
	}
	cx := ctx(t)
	names := ringNames(60)
	for _, n := range names {
		if _, err := rc.Acquire(cx, n, 2, 5); err != nil {
			t.Fatal(err)
		}
		if addr, held := rc.Held(n); addr != ring.Owner(n) || held != 2 {
			t.Fatalf("Held(%q) = %s %d", n, addr, held)
		}
		if v, err := rc.Get(cx, n); v != 2 || err != nil {
			t.Fatalf("Get(%q) = %d, %v", n, v, err)
		}
	}
	direct := map[string]*client.Client{}
	for _, a := range addrs {
		direct[a] = dialClient(t, a)
	}
	perServer := map[string]int{}
	for _, n := range names {
		owner := ring.Owner(n)
		perServer[owner]++
		for a, c := range direct {
			v, err := c.Get(cx, n)
			if a == owner && (v != 2 || err != nil) {
				t.Fatalf("%q on its owner %s: %d, %v", n, a, v, err)
			}
			if a != owner && !errors.Is(err, wire.StatusNotFound) {
				t.Fatalf("%q also on %s (owner %s): %d, %v", n, a, owner, v, err)
			}
		}
	}
	dumped := map[string]int{}
	err = rc.Each(cx, func(addr string, c *client.Client) error {
		if err := c.Noop(cx); err != nil {
			return err
		}
		return c.Dump(cx, func(e wire.DumpEntry) error { dumped[addr]++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dumped) != fmt.Sprint(perServer) {
		t.Fatalf("dumps per server %v, want %v", dumped, perServer)
	}
	for _, n := range names {
		if err := rc.Release(cx, n, 2); err != nil {
			t.Fatal(err)
		}
		if v, err := rc.Get(cx, n); v != 0 || err != nil {
			t.Fatalf("Get(%q) after release = %d, %v", n, v, err)
		}
	}
	if err := rc.Release(cx, names[0], 1); !errors.Is(err, wire.StatusNotAcquired) {
		t.Fatalf("release of nothing held: %v", err)
	}
}

// TestRingClientReleaseFollowsHoldings: after the ring changes, a release
// still reaches the server the resources were acquired on, and a removed
// server's connection stays open while it holds something.
func TestRingClientReleaseFollowsHoldings(t *testing.T) {
	addrs, _ := ringOf(t, 2)
	rc := newRingClient(t, addrs, client.RingOptions{})
	cx := ctx(t)
	// A name owned by the server about to be removed.
	name := ""
	for _, n := range ringNames(100) {
		if rc.Owner(n) == addrs[0] {
			name = n
			break
		}
	}
	if _, err := rc.Acquire(cx, name, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := rc.SetServers(addrs[1:]); err != nil {
		t.Fatal(err)
	}
	if rc.Owner(name) != addrs[1] {
		t.Fatalf("owner after removal %s", rc.Owner(name))
	}
	direct := dialClient(t, addrs[0])
	if v, err := direct.Get(cx, name); v != 1 || err != nil {
		t.Fatalf("the holding on the removed server: %d, %v", v, err)
	}
	if err := rc.Release(cx, name, 1); err != nil {
		t.Fatalf("release after the ring changed: %v", err)
	}
	if v, err := direct.Get(cx, name); v != 0 || err != nil {
		t.Fatalf("after release: %d, %v", v, err)
	}
}

// TestRingClientServerDown: a dead server fails only the names it owns,
// and its holdings are forgotten.
func TestRingClientServerDown(t *testing.T) {
	addrs, servers := ringOf(t, 2)
	rc := newRingClient(t, addrs, client.RingOptions{})
	cx := ctx(t)
	var onDead, onLive string
	for _, n := range ringNames(100) {
		switch rc.Owner(n) {
		case addrs[0]:
			onDead = n
		case addrs[1]:
			onLive = n
		}
	}
	if _, err := rc.Acquire(cx, onDead, 1, 1); err != nil {
		t.Fatal(err)
	}
	servers[addrs[0]].Close()
	if _, err := rc.Get(cx, onDead); err == nil || errors.As(err, new(*wire.StatusError)) {
		t.Fatalf("Get on a dead server: %v", err)
	}
	if addr, n := rc.Held(onDead); n != 0 {
		t.Fatalf("holding on the dead server still recorded: %s %d", addr, n)
	}
	if _, err := rc.Acquire(cx, onLive, 1, 1); err != nil {
		t.Fatalf("the live server: %v", err)
	}
	err := rc.Each(cx, func(addr string, c *client.Client) error { return c.Noop(cx) })
	if err == nil || !containsAddr(err, addrs[0]) || containsAddr(err, addrs[1]) {
		t.Fatalf("Each with one server down: %v", err)
	}
}

func containsAddr(err error, addr string) bool {
	return err != nil && strings.Contains(err.Error(), addr)
}

// TestRingPipeline queues requests for several servers and gets their
// results back in queue order.
func TestRingPipeline(t *testing.T) {
	addrs, _ := ringOf(t, 3)
	rc := newRingClient(t, addrs, client.RingOptions{})
	p := rc.Pipeline()
	names := ringNames(30)
	for i, n := range names {
		p.Acquire(n, uint32(i%3+1), 3)
		p.Get(n)
		p.Add(n, uint64(i+1))
	}
	res, err := p.Exec(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3*len(names) {
		t.Fatalf("%d results", len(res))
	}
	for i, n := range names {
		a, g, h := res[3*i], res[3*i+1], res[3*i+2]
		if a.Op != wire.OpAcquire || a.Err() != nil || a.Value != uint32(i%3+1) ||
			g.Op != wire.OpGet || g.Value != uint32(i%3+1) ||
			h.Op != wire.OpAdd || h.Total != uint64(i+1) {
			t.Fatalf("%q: %+v %+v %+v", n, a, g, h)
		}
		if _, held := rc.Held(n); held != uint64(i%3+1) {
			t.Fatalf("Held(%q) = %d", n, held)
		}
	}
	for _, n := range names {
		p.Release(n, 1)
	}
	if res, err = p.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err() != nil {
			t.Fatalf("release %d: %v", i, r.Err())
		}
		if _, held := rc.Held(names[i]); held != uint64(i%3) {
			t.Fatalf("Held(%q) after release = %d", names[i], held)
		}
	}
}

// TestRingClientDNS resolves localhost into the ring's servers.
func TestRingClientDNS(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := listen(t, s)
	_, port, _ := net.SplitHostPort(addr)
	rc := newRingClient(t, nil, client.RingOptions{DNS: net.JoinHostPort("localhost", port)})
	if !slices.Contains(rc.Servers(), addr) {
		t.Fatalf("servers %v, want %s among them", rc.Servers(), addr)
	}
	if _, err := client.NewRingClient(context.Background(), []string{addr}, client.RingOptions{DNS: "localhost:1"}); err == nil {
		t.Fatal("addresses and DNS both accepted")
	}
	if _, err := client.NewRingClient(context.Background(), nil, client.RingOptions{DNS: "no-such-host.invalid:1"}); err == nil {
		t.Fatal("an unresolvable name accepted")
	}
}

// TestRingClientDNSRefresh: the servers follow what DNS answers, and a
// failed lookup keeps them as they were.
func TestRingClientDNSRefresh(t *testing.T) {
	addrs, _ := ringOf(t, 1)
	host0, port, _ := net.SplitHostPort(addrs[0])
	var mu sync.Mutex
	answer, fail := []string{host0}, false
	// block, when not nil, holds every lookup until it is closed; entered
	// tells that a lookup is being held.
	var block chan struct{}
	entered := make(chan struct{}, 1)
	var closed atomic.Bool // set when Close has returned
	var late atomic.Int32  // lookups started after that
	errs := make(chan error, 1)
	rc := newRingClient(t, nil, client.RingOptions{
		DNS: "counters.internal:" + port, DNSRefresh: 10 * time.Millisecond,
		LookupHost: func(ctx context.Context, host string) ([]string, error) {
			if closed.Load() {
				late.Add(1)
			}
			mu.Lock()
			wait := block
			mu.Unlock()
			if wait != nil {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-wait
			}
			mu.Lock()
			defer mu.Unlock()
			if host != "counters.internal" {
				return nil, fmt.Errorf("lookup of %q", host)
			}
			if fail {
				return nil, errors.New("no such host")
			}
			return answer, nil
		},
		OnDNSError: func(err error) {
			select {
			case errs <- err:
			default: // the test reads one; the refresh loop must not wait
			}
		},
	})
	if got := rc.Servers(); len(got) != 1 || got[0] != addrs[0] {
		t.Fatalf("servers %v", got)
	}
	if _, err := rc.Acquire(ctx(t), "x", 1, 1); err != nil {
		t.Fatal(err)
	}
	// Another address for the same port: 127.0.0.2 is loopback too.
	mu.Lock()
	answer = []string{host0, "127.0.0.2"}
	mu.Unlock()
	eventually.True(t, 5*time.Second, "the ring follows DNS", func() bool { return len(rc.Servers()) == 2 })
	mu.Lock()
	fail = true
	mu.Unlock()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "no such host") {
			t.Fatalf("OnDNSError got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failed lookup was not reported")
	}
	if len(rc.Servers()) != 2 {
		t.Fatalf("a failed lookup changed the servers: %v", rc.Servers())
	}

	// Close waits for the refresh loop, even while it is in a lookup, and
	// no lookup starts once Close has returned.
	mu.Lock()
	block = make(chan struct{})
	mu.Unlock()
	select {
	case <-entered:
	case <-time.After(testTimeout):
		t.Fatal("no lookup started")
	}
	closeDone := make(chan struct{})
	go func() {
		rc.Close()
		closed.Store(true)
		close(closeDone)
	}()
	servers := rc.Servers()
	eventually.True(t, testTimeout, "Close under way", func() bool { return rc.SetServers(servers) != nil })
	select {
	case <-closeDone:
		t.Fatal("Close returned while the refresh loop was in a lookup")
	default:
	}
	close(block)
	select {
	case <-closeDone:
	case <-time.After(testTimeout):
		t.Fatal("Close did not return once the lookup ended")
	}
	if late.Load() != 0 {
		t.Fatal("DNS was resolved after Close")
	}
}

// TestRingClientHoldOutlivesCallDeadline: as TestHoldOutlivesCallDeadline,
// through a RingClient.
func TestRingClientHoldOutlivesCallDeadline(t *testing.T) {
	t.Parallel()
	addrs, _ := ringOf(t, 1)
	rc := newRingClient(t, addrs, client.RingOptions{})
	holdPastCallDeadline(t,
		func(ctx context.Context) error { _, err := rc.Acquire(ctx, "lock", 1, 1); return err },
		rc.Hold)
	if addr, n := rc.Held("lock"); addr != addrs[0] || n != 1 {
		t.Fatalf("after Hold: Held = %s %d, want 1 on %s", addr, n, addrs[0])
	}
	if v, err := dialClient(t, addrs[0]).Get(ctx(t), "lock"); err != nil || v != 1 {
		t.Fatalf("after Hold: Get = %d, %v; want 1 still held", v, err)
	}
}

// TestRingClientHoldServerGone: Hold names the server whose connection it
// lost, and what was held there is no longer recorded.
func TestRingClientHoldServerGone(t *testing.T) {
	addrs, servers := ringOf(t, 1)
	rc := newRingClient(t, addrs, client.RingOptions{})
	if _, err := rc.Acquire(ctx(t), "lock", 1, 1); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- rc.Hold(context.Background()) }()
	servers[addrs[0]].Close()
	select {
	case err := <-held:
		if err == nil || !containsAddr(err, addrs[0]) || !strings.Contains(err.Error(), "closed the connection") {
			t.Fatalf("Hold when the server stopped: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Hold did not notice the server closing the connection")
	}
	if addr, n := rc.Held("lock"); n != 0 {
		t.Fatalf("after the connection was lost: Held = %s %d, want nothing", addr, n)
	}
}

// TestRingClientKeepsConnectionOnCallerErrors: an error that leaves the
// connection usable (a callback's own error inside Each, a context ended
// before anything was sent) neither closes the connection nor forgets
// what is held on it.
func TestRingClientKeepsConnectionOnCallerErrors(t *testing.T) {
	addrs, _ := ringOf(t, 1)
	rc := newRingClient(t, addrs, client.RingOptions{})
	probe := dialClient(t, addrs[0])
	cx := ctx(t)
	if _, err := rc.Acquire(cx, "lock", 1, 1); err != nil {
		t.Fatal(err)
	}
	stillHeld := func(after string) {
		t.Helper()
		if addr, n := rc.Held("lock"); addr != addrs[0] || n != 1 {
			t.Fatalf("after %s: Held = %s %d, want 1 on %s", after, addr, n, addrs[0])
		}
		if v, err := probe.Get(cx, "lock"); v != 1 || err != nil {
			t.Fatalf("after %s: the server has %d, %v; want 1 still held", after, v, err)
		}
	}

	errEnough := errors.New("seen enough")
	err := rc.Each(cx, func(_ string, c *client.Client) error {
		return c.Dump(cx, func(wire.DumpEntry) error { return errEnough })
	})
	if !errors.Is(err, errEnough) || !containsAddr(err, addrs[0]) {
		t.Fatalf("Each whose Dump callback fails: %v, want the callback's error naming the server", err)
	}
	stillHeld("a Dump callback's error")

	cancelled, cancel := context.WithCancel(cx)
	cancel()
	if _, err := rc.Get(cancelled, "other"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v", err)
	}
	stillHeld("a Get with a cancelled context")

	// The holding is on the connection it was acquired on: a release
	// there succeeds (a new connection would hold nothing to release).
	if err := rc.Release(cx, "lock", 1); err != nil {
		t.Fatalf("release on the connection kept: %v", err)
	}
	if v, err := probe.Get(cx, "lock"); v != 0 || err != nil {
		t.Fatalf("after release: %d, %v", v, err)
	}
}

// dyingServer serves connections that answer their first request, an
// Acquire, with success and then close, as a server failing in the middle
// of a pipeline. It returns its address.
func dyingServer(t *testing.T) string {
	t.Helper()
	return tcptest.Serve(t, func(nc net.Conn) {
		nc.SetDeadline(time.Now().Add(testTimeout))
		f, err := wire.NewRequestReader(nc).Read()
		if err != nil || f.Opcode != wire.OpAcquire {
			return
		}
		req, err := wire.ParseAcquire(f.Body)
		if err != nil {
			return
		}
		nc.Write(wire.AppendUint32(nil, f.Opcode, f.Opaque, req.Resources))
	})
}

// TestRingPipelineConnectionLost: an Acquire answered before its
// server's connection failed in the same Exec is not recorded as held:
// the server released it when the connection closed.
func TestRingPipelineConnectionLost(t *testing.T) {
	addr := dyingServer(t)
	rc := newRingClient(t, []string{addr}, client.RingOptions{})
	p := rc.Pipeline()
	p.Acquire("lock", 1, 1)
	p.Get("lock")
	res, err := p.Exec(ctx(t))
	if err == nil || !containsAddr(err, addr) {
		t.Fatalf("Exec when the connection fails midway: %v, want an error naming %s", err, addr)
	}
	if len(res) != 2 || res[0].Op != wire.OpAcquire || res[0].Err() != nil || res[1].Op != 0 {
		t.Fatalf("results %+v, want the acquire answered and the get missing", res)
	}
	if a, n := rc.Held("lock"); n != 0 {
		t.Fatalf("Held = %s %d after the connection failed, want nothing", a, n)
	}
}
