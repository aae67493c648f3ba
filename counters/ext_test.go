package counters_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// Hex of the fixtures' names and keys: "vk.messages" =
// 766b2e6d65737361676573 (11 bytes), "vk.users" = 766b2e7573657273 (8),
// "42" = 3432, "43" = 3433. Error bodies: "Not found" =
// 4e6f7420666f756e64, "Invalid arguments" =
// 496e76616c696420617267756d656e7473, "Store unavailable" =
// 53746f726520756e617661696c61626c65.
const (
	hexNotFound = "4e6f7420666f756e64"
	hexInvalid  = "496e76616c696420617267756d656e7473"
	hexStore    = "53746f726520756e617661696c61626c65"
)

// TestExtensionFixtures sends byte-exact extension requests and checks
// byte-exact answers, in one session on one connection, against the
// default in-memory stores.
func TestExtensionFixtures(t *testing.T) {
	clock := newFakeClock(day)
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(clock.Now), Clock: clock.Now})
	c := pipe(t, s)
	steps := []struct {
		name      string
		req, resp string
		then      func()
	}{
		{name: "total never hit: not found", req: "90 21 00 00 0000000d 00000001 000b 766b2e6d65737361676573",
			resp: "91 21 01 00 00000009 00000001 " + hexNotFound},
		{name: "hit creates at 1", req: "90 20 00 00 0000000d 00000002 000b 766b2e6d65737361676573",
			resp: "91 20 00 00 00000008 00000002 0000000000000001"},
		{name: "hit", req: "90 20 00 00 0000000d 00000003 000b 766b2e6d65737361676573",
			resp: "91 20 00 00 00000008 00000003 0000000000000002"},
		{name: "total", req: "90 21 00 00 0000000d 00000004 000b 766b2e6d65737361676573",
			resp: "91 21 00 00 00000008 00000004 0000000000000002"},
		{name: "add 5", req: "90 22 00 00 00000015 00000030 0000000000000005 000b 766b2e6d65737361676573",
			resp: "91 22 00 00 00000008 00000030 0000000000000007"},
		{name: "add 0: invalid", req: "90 22 00 00 00000015 00000031 0000000000000000 000b 766b2e6d65737361676573",
			resp: "91 22 04 00 00000011 00000031 " + hexInvalid},
		{name: "add 2^63: invalid", req: "90 22 00 00 00000015 00000032 8000000000000000 000b 766b2e6d65737361676573",
			resp: "91 22 04 00 00000011 00000032 " + hexInvalid},
		{name: "add a new counter creates it at the delta", req: "90 22 00 00 0000000b 00000033 0000000000000003 0001 61",
			resp: "91 22 00 00 00000008 00000033 0000000000000003"},
		{name: "total after add", req: "90 21 00 00 0000000d 00000034 000b 766b2e6d65737361676573",
			resp: "91 21 00 00 00000008 00000034 0000000000000007"},
		{name: "hit empty name: invalid", req: "90 20 00 00 00000002 00000005 0000",
			resp: "91 20 04 00 00000011 00000005 " + hexInvalid},
		{name: "total empty name: invalid", req: "90 21 00 00 00000002 00000006 0000",
			resp: "91 21 04 00 00000011 00000006 " + hexInvalid},
		{name: "hit name over the store's 255 bytes: invalid", req: "90 20 00 00 00000102 00000007 0100 " + strings.Repeat("61", 256),
			resp: "91 20 04 00 00000011 00000007 " + hexInvalid},
		{name: "hit body shorter than the name: invalid", req: "90 20 00 00 00000003 00000008 0002 61",
			resp: "91 20 04 00 00000011 00000008 " + hexInvalid},
		{name: "visit new key", req: "90 30 00 00 00000012 00000009 0000012c 0008 766b2e7573657273 0002 3432",
			resp: "91 30 00 00 00000005 00000009 00000001 01"},
		{name: "visit again: not new", req: "90 30 00 00 00000012 0000000a 0000012c 0008 766b2e7573657273 0002 3432",
			resp: "91 30 00 00 00000005 0000000a 00000001 00"},
		{name: "visit another key, default timeout", req: "90 30 00 00 00000012 0000000b 00000000 0008 766b2e7573657273 0002 3433",
			resp: "91 30 00 00 00000005 0000000b 00000002 01"},
		{name: "visit empty key: invalid", req: "90 30 00 00 00000010 0000000c 00000000 0008 766b2e7573657273 0000",
			resp: "91 30 04 00 00000011 0000000c " + hexInvalid},
		{name: "visit empty name: invalid", req: "90 30 00 00 0000000a 0000000d 00000000 0000 0002 3432",
			resp: "91 30 04 00 00000011 0000000d " + hexInvalid},
		{name: "active", req: "90 32 00 00 0000000e 0000000e 00000000 0008 766b2e7573657273",
			resp: "91 32 00 00 00000004 0000000e 00000002"},
		{name: "leave", req: "90 31 00 00 0000000e 0000000f 0008 766b2e7573657273 0002 3432",
			resp: "91 31 00 00 00000005 0000000f 00000001 01"},
		{name: "leave again: nothing removed", req: "90 31 00 00 0000000e 00000010 0008 766b2e7573657273 0002 3432",
			resp: "91 31 00 00 00000005 00000010 00000001 00"},
		{name: "leave empty key: invalid", req: "90 31 00 00 0000000c 00000011 0008 766b2e7573657273 0000",
			resp: "91 31 04 00 00000011 00000011 " + hexInvalid},
		{name: "active empty name: invalid", req: "90 32 00 00 00000006 00000012 00000000 0000",
			resp: "91 32 04 00 00000011 00000012 " + hexInvalid, then: func() { clock.Set(day + 301) }},
		{name: "active after the default timeout", req: "90 32 00 00 0000000e 00000013 00000000 0008 766b2e7573657273",
			resp: "91 32 00 00 00000004 00000013 00000000"},
		{name: "active with a longer timeout", req: "90 32 00 00 0000000e 00000014 00000258 0008 766b2e7573657273",
			resp: "91 32 00 00 00000004 00000014 00000001"},
		{name: "the connection is still open", req: "90 00 00 00 00000000 00000015", resp: "91 00 00 00 00000000 00000015"},
	}
	for _, st := range steps {
		want := unhex(t, st.resp)
		got := exchange(t, c, unhex(t, st.req), len(want))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s:\ngot  % x\nwant % x", st.name, got, want)
		}
		if st.then != nil {
			st.then()
		}
	}
	m := statsMap(s)
	for name, v := range map[string]string{
		// Invalid requests are not counted, as for the resource opcodes.
		"command:hit": "2", "command:total": "3", "command:add": "2", "command:visit": "3", "command:leave": "2", "command:active": "3",
	} {
		if m[name] != v {
			t.Errorf("%s = %q, want %q", name, m[name], v)
		}
	}
}

// TestExtensionPipelined sends 100 extension requests in one write and
// checks the 100 answers, in order, byte for byte. Round r hits "pages"
// and reads its total, visits key r of "room", counts "room" and makes key
// r-1 leave, so after round 0 two keys are active at each count.
func TestExtensionPipelined(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dial(t, listen(t, s))
	var req, want []byte
	for r := range 20 {
		op := uint32(5 * r)
		active := uint32(2)
		if r == 0 {
			active = 1
		}
		req = wire.AppendHit(req, op, "pages")
		want = wire.AppendUint64(want, wire.OpHit, op, uint64(r+1))
		req = wire.AppendTotal(req, op+1, "pages")
		want = wire.AppendUint64(want, wire.OpTotal, op+1, uint64(r+1))
		req = wire.AppendVisit(req, op+2, 60, "room", fmt.Sprint(r))
		want = wire.AppendUint32Flag(want, wire.OpVisit, op+2, active, true)
		req = wire.AppendActive(req, op+3, 60, "room")
		want = wire.AppendUint32(want, wire.OpActive, op+3, active)
		req = wire.AppendLeave(req, op+4, "room", fmt.Sprint(r-1))
		want = wire.AppendUint32Flag(want, wire.OpLeave, op+4, 1, r > 0)
	}
	got := exchange(t, c, req, len(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("pipelined answers differ:\ngot  % x\nwant % x", got, want)
	}
}

// memoryStoresWith returns memory stores changed by edit.
func memoryStoresWith(edit func(*counters.Stores)) counters.Stores {
	s := counters.MemoryStores(nil)
	edit(&s)
	return s
}

func fakeStores(fn func(ctx context.Context, op string) error) counters.Stores {
	return counterstest.FakeStores(fn)
}

func TestStoreFailureKeepsTheConnection(t *testing.T) {
	broken := errors.New("redis: connection refused")
	o := &countingObserver{requests: make(map[string]int)}
	var log bytes.Buffer // written before each answer, read after the answers
	s := newServer(t, counters.ServerOptions{Observer: o, Logger: zerolog.New(zerolog.SyncWriter(&log)),
		Stores: fakeStores(func(context.Context, string) error { return broken })})
	c := pipe(t, s)
	var req []byte
	req = wire.AppendHit(req, 1, "a")
	req = wire.AppendTotal(req, 2, "a")
	req = wire.AppendVisit(req, 3, 0, "a", "k")
	req = wire.AppendLeave(req, 4, "a", "k")
	req = wire.AppendActive(req, 5, 0, "a")
	req = wire.AppendNoop(req, 6)
	want := "91 20 86 00 00000011 00000001 " + hexStore +
		"91 21 86 00 00000011 00000002 " + hexStore +
		"91 30 86 00 00000011 00000003 " + hexStore +
		"91 31 86 00 00000011 00000004 " + hexStore +
		"91 32 86 00 00000011 00000005 " + hexStore +
		"91 00 00 00 00000000 00000006"
	got := exchange(t, c, req, len(unhex(t, want)))
	equalBytes(t, "answers", got, want)
	o.mu.Lock()
	n := o.requests["hit/Store unavailable"]
	o.mu.Unlock()
	if n != 1 {
		t.Fatalf("observer saw %v", o.requests)
	}
	if n := strings.Count(log.String(), `"message":"counter store failed"`); n != 1 {
		t.Fatalf("%d failure lines for 5 failures in a row, want 1 (rate-limited):\n%s", n, log.String())
	}
	// The arguments are checked before the store is asked.
	got = exchange(t, c, wire.AppendHit(nil, 7, ""), 29)
	equalBytes(t, "invalid before the store", got, "91 20 04 00 00000011 00000007 "+hexInvalid)
}

// TestRedisDownIsAStoreFailure: the Redis stores of a server whose Redis
// has gone answer Store unavailable, and recover when it is back.
func TestRedisDownIsAStoreFailure(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	prefix := redistest.Prefix(t)
	s := newServer(t, counters.ServerOptions{Stores: memoryStoresWith(func(s *counters.Stores) {
		s.Access, s.Participants = redisAccess(t, tg.Client, prefix), redisParticipants(t, tg.Client, prefix)
		s.Timeout = 200 * time.Millisecond
	})})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	if n, err := c.Hit(cx, "h"); n != 1 || err != nil {
		t.Fatalf("Hit = %d, %v", n, err)
	}
	tg.Mini.Close()
	if _, err := c.Hit(cx, "h"); !errors.Is(err, wire.StatusStoreFailure) {
		t.Fatalf("Hit with Redis down: %v, want Store unavailable", err)
	}
	if _, _, err := c.Visit(cx, "v", "k", 0); !errors.Is(err, wire.StatusStoreFailure) {
		t.Fatalf("Visit with Redis down: %v, want Store unavailable", err)
	}
	if err := tg.Mini.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Hit(cx, "h"); n != 2 || err != nil {
		t.Fatalf("Hit after Redis came back = %d, %v: the same connection must work again", n, err)
	}
}

// TestSlowStoreStallsOnlyItsConnection: while one connection's store call
// hangs, another connection is served; the call ends at the store timeout
// with Store unavailable.
func TestSlowStoreStallsOnlyItsConnection(t *testing.T) {
	b := counterstest.NewBlocker()
	fast := access.NewMemory(access.MemoryLimits{})
	slow := fakeStores(b.Call).Participants
	s := newServer(t, counters.ServerOptions{Stores: memoryStoresWith(func(s *counters.Stores) {
		s.Access, s.Participants, s.Timeout = fast, slow, 100*time.Millisecond
	})})
	addr := listen(t, s)
	stalled, other := dialClient(t, addr), dialClient(t, addr)
	done := make(chan error, 1)
	go func() { _, _, err := stalled.Visit(context.Background(), "v", "k", 0); done <- err }()
	if op := <-b.Started; op != "visit" {
		t.Fatalf("store call %q", op)
	}
	if n, err := other.Hit(ctx(t), "h"); n != 1 || err != nil {
		t.Fatalf("another connection is not served while a store call hangs: %d, %v", n, err)
	}
	if err := <-done; !errors.Is(err, wire.StatusStoreFailure) {
		t.Fatalf("hung Visit: %v, want Store unavailable", err)
	}
	if err := <-b.Ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the store call ended with %v, want the store timeout", err)
	}
	if err := stalled.Noop(ctx(t)); err != nil {
		t.Fatalf("the connection is unusable after a store timeout: %v", err)
	}
}

// TestCloseCancelsStoreCalls: Close does not wait for a store call's
// timeout; it cancels the call.
func TestCloseCancelsStoreCalls(t *testing.T) {
	b := counterstest.NewBlocker()
	s, err := counters.NewServer(counters.ServerOptions{Stores: memoryStoresWith(func(s *counters.Stores) {
		s.Access, s.Timeout = fakeStores(b.Call).Access, time.Hour
	})})
	if err != nil {
		t.Fatal(err)
	}
	c := pipe(t, s)
	go c.Write(wire.AppendHit(nil, 1, "h"))
	<-b.Started
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := <-b.Ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("store call ended with %v, want context.Canceled", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

func TestNewServerRejectsNegativeStoreTimeout(t *testing.T) {
	if s, err := counters.NewServer(counters.ServerOptions{Stores: memoryStoresWith(func(s *counters.Stores) { s.Timeout = -1 })}); err == nil {
		s.Close()
		t.Fatal("NewServer accepted a negative store timeout")
	}
}

func TestClientExtension(t *testing.T) {
	clock := newFakeClock(day)
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(clock.Now), Clock: clock.Now})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	if _, err := c.Total(cx, "views"); !errors.Is(err, wire.StatusNotFound) {
		t.Fatalf("Total never hit: %v", err)
	}
	for want := int64(1); want <= 3; want++ {
		if n, err := c.Hit(cx, "views"); n != want || err != nil {
			t.Fatalf("Hit = %d, %v; want %d", n, err, want)
		}
	}
	if n, err := c.Total(cx, "views"); n != 3 || err != nil {
		t.Fatalf("Total = %d, %v", n, err)
	}
	if n, err := c.Add(cx, "views", 10); n != 13 || err != nil {
		t.Fatalf("Add 10 = %d, %v; want 13", n, err)
	}
	if _, err := c.Add(cx, "views", 0); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("Add 0 = %v, want ErrInvalid before sending", err)
	}
	type visit struct {
		n    int
		flag bool
	}
	check := func(what string, n int, flag bool, err error, want visit) {
		t.Helper()
		if err != nil || n != want.n || flag != want.flag {
			t.Fatalf("%s = %d %v, %v; want %+v", what, n, flag, err, want)
		}
	}
	n, isNew, err := c.Visit(cx, "room", "alice", time.Minute)
	check("Visit alice", n, isNew, err, visit{1, true})
	n, isNew, err = c.Visit(cx, "room", "bob", 90*time.Second+500*time.Millisecond)
	check("Visit bob", n, isNew, err, visit{2, true})
	n, isNew, err = c.Visit(cx, "room", "alice", time.Minute)
	check("Visit alice again", n, isNew, err, visit{2, false})
	n, removed, err := c.Leave(cx, "room", "bob")
	check("Leave bob", n, removed, err, visit{1, true})
	n, removed, err = c.Leave(cx, "room", "carol")
	check("Leave carol, never there", n, removed, err, visit{1, false})
	clock.Set(day + 61)
	if n, err := c.Active(cx, "room", time.Minute); n != 0 || err != nil {
		t.Fatalf("Active after a minute = %d, %v", n, err)
	}
	if n, err := c.Active(cx, "room", 0); n != 1 || err != nil {
		t.Fatalf("Active with the default timeout = %d, %v", n, err)
	}
}

func TestPipelineExtension(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	p := c.Pipeline()
	p.Total("t")
	p.Hit("t")
	p.Hit("t")
	p.Total("t")
	p.Visit("r", "k1", 0)
	p.Visit("r", "k2", 30)
	p.Visit("r", "k1", 30)
	p.Active("r", 30)
	p.Leave("r", "k1")
	p.Leave("r", "k1")
	p.Visit("r", "", 0)
	p.Hit("")
	res, err := p.Exec(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Result{
		{Op: wire.OpTotal, Status: wire.StatusNotFound, Message: "Not found"},
		{Op: wire.OpHit, Total: 1},
		{Op: wire.OpHit, Total: 2},
		{Op: wire.OpTotal, Total: 2},
		{Op: wire.OpVisit, Value: 1, Flag: true},
		{Op: wire.OpVisit, Value: 2, Flag: true},
		{Op: wire.OpVisit, Value: 2},
		{Op: wire.OpActive, Value: 2},
		{Op: wire.OpLeave, Value: 1, Flag: true},
		{Op: wire.OpLeave, Value: 1},
		{Op: wire.OpVisit, Status: wire.StatusInvalid, Message: "Invalid arguments"},
		{Op: wire.OpHit, Status: wire.StatusInvalid, Message: "Invalid arguments"},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		r := res[i]
		r.Latency = 0
		if r != w {
			t.Errorf("result %d = %+v, want %+v", i, r, w)
		}
	}
}

// TestRedisStoresSharedByServers: two servers (two instances of the
// service) on one Redis serve the same access and participant counters.
func TestRedisStoresSharedByServers(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		t.Cleanup(func() { delKeys(t, tg, prefix) })
		stores := counters.MemoryStores(nil)
		stores.Access, stores.Participants = redisAccess(t, tg.Client, prefix), redisParticipants(t, tg.Client, prefix)
		a := dialClient(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores})))
		b := dialClient(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores})))
		cx := ctx(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, c := range []*client.Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := c.Pipeline()
				for range 50 {
					p.Hit("shared")
				}
				res, err := p.Exec(cx)
				for _, r := range res {
					if err == nil {
						err = r.Err()
					}
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n, err := b.Total(cx, "shared"); n != 100 || err != nil {
			t.Fatalf("Total = %d, %v; want 100 hits from both servers", n, err)
		}
		if _, isNew, err := a.Visit(cx, "users", "7", 0); !isNew || err != nil {
			t.Fatalf("Visit on a: new %v, %v", isNew, err)
		}
		if n, isNew, err := b.Visit(cx, "users", "7", 0); n != 1 || isNew || err != nil {
			t.Fatalf("Visit of the same key on b = %d, new %v, %v; want 1, not new", n, isNew, err)
		}
		if n, removed, err := b.Leave(cx, "users", "7"); n != 0 || !removed || err != nil {
			t.Fatalf("Leave on b = %d, %v, %v", n, removed, err)
		}
		if n, err := a.Active(cx, "users", 0); n != 0 || err != nil {
			t.Fatalf("Active on a = %d, %v", n, err)
		}
	})
}

// delKeys deletes the keys under prefix one by one (they may live in
// different cluster slots): access counters do not expire.
func delKeys(t testing.TB, tg *redistest.Target, prefix string) {
	t.Helper()
	for _, k := range redistest.Keys(t, tg.Client, prefix) {
		if err := tg.Client.Del(context.Background(), k).Err(); err != nil {
			t.Errorf("del %s: %v", k, err)
		}
	}
}

// TestClientExtensionBytes: each client method, and a pipeline, sends the
// fixture's bytes and decodes the fixture's answer.
func TestClientExtensionBytes(t *testing.T) {
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	c2.SetDeadline(time.Now().Add(testTimeout))
	c := client.NewClient(c1)
	cx := ctx(t)
	pairs := func(n int, flag bool, err error) (string, error) { return fmt.Sprint(n, " ", flag), err }
	steps := []struct {
		name, req, resp string
		call            func() (string, error)
		want            string
		wantErr         error
	}{
		{"hit", "90 20 00 00 0000000d 00000001 000b 766b2e6d65737361676573",
			"91 20 00 00 00000008 00000001 000000000000039e",
			func() (string, error) { n, err := c.Hit(cx, "vk.messages"); return fmt.Sprint(n), err }, "926", nil},
		{"total not found", "90 21 00 00 0000000d 00000002 000b 766b2e6d65737361676573",
			"91 21 01 00 00000009 00000002 " + hexNotFound,
			func() (string, error) { n, err := c.Total(cx, "vk.messages"); return fmt.Sprint(n), err }, "", wire.StatusNotFound},
		{"visit", "90 30 00 00 00000012 00000003 0000012c 0008 766b2e7573657273 0002 3432",
			"91 30 00 00 00000005 00000003 00000003 01",
			func() (string, error) { return pairs(c.Visit(cx, "vk.users", "42", 300*time.Second)) }, "3 true", nil},
		{"leave", "90 31 00 00 0000000e 00000004 0008 766b2e7573657273 0002 3432",
			"91 31 00 00 00000005 00000004 00000002 00",
			func() (string, error) { return pairs(c.Leave(cx, "vk.users", "42")) }, "2 false", nil},
		{"active", "90 32 00 00 0000000e 00000005 00000000 0008 766b2e7573657273",
			"91 32 00 00 00000004 00000005 00000007",
			func() (string, error) { n, err := c.Active(cx, "vk.users", 0); return fmt.Sprint(n), err }, "7", nil},
		{"store failure", "90 20 00 00 0000000d 00000006 000b 766b2e6d65737361676573",
			"91 20 86 00 00000011 00000006 " + hexStore,
			func() (string, error) { n, err := c.Hit(cx, "vk.messages"); return fmt.Sprint(n), err }, "", wire.StatusStoreFailure},
		{"pipeline", "90 20 00 00 0000000d 00000007 000b 766b2e6d65737361676573" +
			"90 30 00 00 00000012 00000008 0000012c 0008 766b2e7573657273 0002 3432",
			"91 20 00 00 00000008 00000007 000000000000039f 91 30 00 00 00000005 00000008 00000003 00",
			func() (string, error) {
				p := c.Pipeline()
				p.Hit("vk.messages")
				p.Visit("vk.users", "42", 300)
				res, err := p.Exec(cx)
				if err != nil || len(res) != 2 {
					return "", fmt.Errorf("%d results, %v", len(res), err)
				}
				return fmt.Sprint(res[0].Total, " ", res[1].Value, " ", res[1].Flag), nil
			}, "927 3 false", nil},
	}
	for _, st := range steps {
		req, resp := unhex(t, st.req), unhex(t, st.resp)
		sent := make(chan []byte, 1)
		go func() {
			b := make([]byte, len(req))
			if _, err := io.ReadFull(c2, b); err != nil {
				sent <- nil
				return
			}
			sent <- b
			c2.Write(resp)
		}()
		got, err := st.call()
		if b := <-sent; !bytes.Equal(b, req) {
			t.Fatalf("%s: client sent\n% x\nwant\n% x", st.name, b, req)
		}
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: error %v, want %v", st.name, err, st.wantErr)
			}
			continue
		}
		if err != nil || got != st.want {
			t.Fatalf("%s: got %q, %v; want %q", st.name, got, err, st.want)
		}
	}
}
