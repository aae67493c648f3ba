package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

func TestClient(t *testing.T) {
	clock := newFakeClock(day)
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(clock.Now), Clock: clock.Now})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	if err := c.Noop(cx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Acquire(cx, "a", 2, 3); n != 2 || err != nil {
		t.Fatalf("Acquire = %d, %v", n, err)
	}
	if _, err := c.Acquire(cx, "a", 2, 3); !errors.Is(err, wire.StatusNotAvailable) {
		t.Fatalf("Acquire over the maximum: %v", err)
	}
	var se *wire.StatusError
	if _, err := c.Get(cx, "b"); !errors.As(err, &se) || se.Status != wire.StatusNotFound || se.Message != "Not found" {
		t.Fatalf("Get of a missing counter: %v", err)
	}
	if v, err := c.Get(cx, "a"); v != 2 || err != nil {
		t.Fatalf("Get = %d, %v", v, err)
	}
	if err := c.Release(cx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if got := dumpAll(t, c); len(got) != 1 || got[0] != (wire.DumpEntry{Name: "a", Consumption: 1, MaxConsumption: 2}) {
		t.Fatalf("Dump = %v", got)
	}
	stats, err := c.Stats(cx)
	if err != nil || len(stats) < 15 || stats[0].Name != "objects" || stats[0].Value != "1" {
		t.Fatalf("Stats = %v, %v", stats, err)
	}
}

func TestClientRefusesInvalidArgumentsWithoutSending(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	long := strings.Repeat("n", wire.MaxNameLen+1)
	for name, err := range map[string]error{
		"acquire 0":          func() error { _, err := c.Acquire(cx, "a", 0, 1); return err }(),
		"acquire max below":  func() error { _, err := c.Acquire(cx, "a", 2, 1); return err }(),
		"acquire empty name": func() error { _, err := c.Acquire(cx, "", 1, 1); return err }(),
		"get long name":      func() error { _, err := c.Get(cx, long); return err }(),
		"release empty name": c.Release(cx, "", 0),
	} {
		if !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: %v, want wire.ErrInvalid", name, err)
		}
	}
	if m := statsMap(s); m["total_objects"] != "0" {
		t.Fatalf("an invalid call reached the server: %v", m)
	}
	if err := c.Noop(cx); err != nil {
		t.Fatalf("the client is unusable after refusing arguments: %v", err)
	}
}

func TestPipeline(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	p := c.Pipeline()
	for range 2 { // the pipeline is reusable
		p.Noop()
		p.Acquire("p", 3, 5)
		p.Acquire("p", 3, 5)
		p.Get("p")
		p.Release("p", 3)
		p.Release("p", 1)
		p.Get("")
		if p.Len() != 7 {
			t.Fatalf("Len = %d", p.Len())
		}
		res, err := p.Exec(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			op    wire.Opcode
			st    wire.Status
			value uint32
		}{
			{wire.OpNoop, wire.StatusOK, 0},
			{wire.OpAcquire, wire.StatusOK, 3},
			{wire.OpAcquire, wire.StatusNotAvailable, 0},
			{wire.OpGet, wire.StatusOK, 3},
			{wire.OpRelease, wire.StatusOK, 0},
			{wire.OpRelease, wire.StatusNotAcquired, 0},
			{wire.OpGet, wire.StatusInvalid, 0},
		}
		if len(res) != len(want) {
			t.Fatalf("%d results, want %d", len(res), len(want))
		}
		for i, w := range want {
			r := res[i]
			if r.Op != w.op || r.Status != w.st || r.Value != w.value || r.Latency <= 0 {
				t.Errorf("result %d = %+v, want %+v", i, r, w)
			}
			if (r.Err() == nil) != (w.st == wire.StatusOK) || (r.Err() != nil && !errors.Is(r.Err(), w.st)) {
				t.Errorf("result %d: Err() = %v", i, r.Err())
			}
			if w.st != wire.StatusOK && r.Message != w.st.Message() {
				t.Errorf("result %d: message %q", i, r.Message)
			}
		}
		if p.Len() != 0 {
			t.Fatalf("Len after Exec = %d", p.Len())
		}
	}
	if res, err := p.Exec(ctx(t)); len(res) != 0 || err != nil {
		t.Fatalf("empty Exec = %v, %v", res, err)
	}
}

// fakeServer answers each request on a pipe with answer(request header).
func fakeServer(t *testing.T, answer func(h wire.Header) []byte) *client.Client {
	t.Helper()
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	go func() {
		r := wire.NewRequestReader(c2)
		for {
			f, err := r.Read()
			if err != nil {
				return
			}
			if b := answer(f.Header); b != nil {
				if _, err := c2.Write(b); err != nil {
					return
				}
			}
		}
	}()
	return client.NewClient(c1)
}

func TestClientDetectsOutOfStepAnswers(t *testing.T) {
	c := fakeServer(t, func(h wire.Header) []byte {
		return wire.AppendResponse(nil, h.Opcode, wire.StatusOK, h.Opaque+1, nil)
	})
	err := c.Noop(ctx(t))
	if err == nil || !strings.Contains(err.Error(), "out of step") {
		t.Fatalf("Noop with a wrong opaque: %v", err)
	}
	if err2 := c.Noop(ctx(t)); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("later call: %v, want the first error again", err2)
	}
	p := c.Pipeline()
	p.Noop()
	if _, err := p.Exec(ctx(t)); err == nil {
		t.Fatal("pipeline on an unusable client succeeded")
	}
}

func TestClientMalformedAnswers(t *testing.T) {
	for name, answer := range map[string]func(h wire.Header) []byte{
		"short get body": func(h wire.Header) []byte {
			return wire.AppendResponse(nil, h.Opcode, wire.StatusOK, h.Opaque, []byte{1})
		},
		"request magic": func(h wire.Header) []byte {
			return wire.AppendNoop(nil, h.Opaque)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeServer(t, answer)
			if _, err := c.Get(ctx(t), "x"); err == nil || errors.As(err, new(*wire.StatusError)) {
				t.Fatalf("Get = %v, want a connection error", err)
			}
		})
	}
}

func TestClientContext(t *testing.T) {
	c := fakeServer(t, func(wire.Header) []byte { return nil }) // never answers
	cx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Noop(cx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Noop past its deadline: %v", err)
	}
	cx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := client.NewClient(nil).Noop(cx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Noop with a cancelled context: %v", err)
	}
	// Cancellation while waiting for the answer.
	c = fakeServer(t, func(wire.Header) []byte { return nil })
	cx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Noop(cx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Noop cancelled while waiting: %v", err)
	}
}

func TestClientDumpCallbackError(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := c.Acquire(cx, n, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := c.Dump(cx, func(wire.DumpEntry) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("Dump = %v after %d calls, want stop after 1", err, calls)
	}
	// The rest of the dump was consumed: the connection is in step.
	if v, err := c.Get(cx, "b"); v != 1 || err != nil {
		t.Fatalf("Get after a stopped dump = %d, %v", v, err)
	}
}

func TestDialFails(t *testing.T) {
	addr := tcptest.FreeAddr(t)
	if _, err := client.Dial(ctx(t), addr); err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
}

func TestClientRefusesInvalidExtensionArguments(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	long := strings.Repeat("n", wire.MaxNameLen+1)
	longList := strings.Repeat("p", wire.MaxListField+1)
	for name, err := range map[string]error{
		"hit empty name":      func() error { _, err := c.Hit(cx, ""); return err }(),
		"total long name":     func() error { _, err := c.Total(cx, long); return err }(),
		"visit empty key":     func() error { _, _, err := c.Visit(cx, "n", "", 0); return err }(),
		"visit empty name":    func() error { _, _, err := c.Visit(cx, "", "k", 0); return err }(),
		"visit long key":      func() error { _, _, err := c.Visit(cx, "n", long, 0); return err }(),
		"visit under 1s":      func() error { _, _, err := c.Visit(cx, "n", "k", time.Millisecond); return err }(),
		"visit negative":      func() error { _, _, err := c.Visit(cx, "n", "k", -time.Second); return err }(),
		"visit over 2^32 s":   func() error { _, _, err := c.Visit(cx, "n", "k", participant.MaxTimeout+time.Second); return err }(),
		"leave empty key":     func() error { _, _, err := c.Leave(cx, "n", ""); return err }(),
		"active empty name":   func() error { _, err := c.Active(cx, "", 0); return err }(),
		"active bad timeout":  func() error { _, err := c.Active(cx, "n", -1); return err }(),
		"leave empty name":    func() error { _, _, err := c.Leave(cx, "", "k"); return err }(),
		"total empty name":    func() error { _, err := c.Total(cx, ""); return err }(),
		"visit 1ns over zero": func() error { _, _, err := c.Visit(cx, "n", "k", 1); return err }(),
		"list long prefix":    func() error { _, _, err := c.List(cx, longList, "", 10); return err }(),
		"list long after":     func() error { _, _, err := c.List(cx, "p", longList, 10); return err }(),
		"list limit 0":        func() error { _, _, err := c.List(cx, "p", "", 0); return err }(),
		"list limit over":     func() error { _, _, err := c.List(cx, "p", "", wire.MaxListLimit+1); return err }(),
		"CheckList long":      client.CheckList(longList, "", 10),
	} {
		if !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: %v, want wire.ErrInvalid", name, err)
		}
	}
	if err := client.CheckList(longList[1:], longList[1:], wire.MaxListLimit); err != nil {
		t.Errorf("CheckList at the limits: %v", err)
	}
	for _, op := range []string{"hit", "total", "visit", "leave", "active", "list"} {
		if v := statsMap(s)["command:"+op]; v != "0" {
			t.Errorf("an invalid %s reached the server: command:%s = %s", op, op, v)
		}
	}
	if err := c.Noop(cx); err != nil {
		t.Fatalf("the client is unusable after refusing arguments: %v", err)
	}
}

func TestClientMalformedExtensionAnswers(t *testing.T) {
	hit := func(c *client.Client) error { _, err := c.Hit(ctx(t), "n"); return err }
	visit := func(c *client.Client) error { _, _, err := c.Visit(ctx(t), "n", "k", 0); return err }
	for _, tc := range []struct {
		name   string
		answer func(h wire.Header) []byte
		call   func(c *client.Client) error
	}{
		{"total beyond int64", func(h wire.Header) []byte { return wire.AppendUint64(nil, h.Opcode, h.Opaque, 1<<63) }, hit},
		{"4-byte total", func(h wire.Header) []byte { return wire.AppendUint32(nil, h.Opcode, h.Opaque, 1) }, hit},
		{"flag byte 2", func(h wire.Header) []byte {
			return append(wire.AppendUint32(nil, h.Opcode, h.Opaque, 1)[:wire.HeaderSize+4], 2)
		}, visit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeServer(t, func(h wire.Header) []byte {
				b := tc.answer(h)
				// Fix up the body length for the hand-made flag answer.
				copy(b[4:8], wire.AppendHeader(nil, wire.Header{BodyLen: uint32(len(b) - wire.HeaderSize)})[4:8])
				return b
			})
			if err := tc.call(c); !errors.Is(err, wire.ErrMalformed) || errors.As(err, new(*wire.StatusError)) {
				t.Fatalf("%v, want a malformed-answer connection error", err)
			}
		})
	}
}
