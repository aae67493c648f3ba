package counters_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// day is an epoch second at the start of an interval of the tests' clocks.
const day = 20000 * 86400

// TestFixtures sends byte-exact requests and checks byte-exact answers for
// every opcode and every status, in one session on one connection.
func TestFixtures(t *testing.T) {
	clock := newFakeClock(day + 3600)
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(clock.Now), Clock: clock.Now, MaxMemory: 1000})
	c := pipe(t, s)
	steps := []struct {
		name      string
		req, resp string
	}{
		{"noop", "90 00 00 00 00000000 01020304", "91 00 00 00 00000000 01020304"},
		{"get missing: not found", "90 01 00 00 00000006 00000002 0004 6a6f6273",
			"91 01 01 00 00000009 00000002 4e6f7420666f756e64"},
		{"acquire creates", "90 02 00 00 0000000e 00000003 00000002 0000000a 0004 6a6f6273",
			"91 02 00 00 00000004 00000003 00000002"},
		{"acquire up to the maximum answers the resources requested", "90 02 00 00 0000000e 00000004 00000008 0000000a 0004 6a6f6273",
			"91 02 00 00 00000004 00000004 00000008"},
		{"get", "90 01 00 00 00000006 00000005 0004 6a6f6273", "91 01 00 00 00000004 00000005 0000000a"},
		{"acquire over the maximum: not available", "90 02 00 00 0000000e 00000006 00000001 0000000a 0004 6a6f6273",
			"91 02 21 00 00000016 00000006 5265736f75726365206e6f7420617661696c61626c65"},
		{"acquire 0: invalid", "90 02 00 00 0000000e 00000007 00000000 0000000a 0004 6a6f6273",
			"91 02 04 00 00000011 00000007 496e76616c696420617267756d656e7473"},
		{"release more than held: not acquired", "90 03 00 00 0000000a 00000008 0000000b 0004 6a6f6273",
			"91 03 22 00 0000000c 00000008 4e6f74206163717569726564"},
		{"release 0 of a missing counter: not found", "90 03 00 00 00000007 00000009 00000000 0001 78",
			"91 03 01 00 00000009 00000009 4e6f7420666f756e64"},
		{"release", "90 03 00 00 0000000a 0000000a 0000000a 0004 6a6f6273", "91 03 00 00 00000000 0000000a"},
		{"unknown opcode keeps the connection", "90 7f 00 00 00000003 0000000b 616263",
			"91 7f 81 00 0000000f 0000000b 556e6b6e6f776e20636f6d6d616e64"},
		{"flags and reserved are ignored", "90 00 ff ee 00000000 0000000c", "91 00 00 00 00000000 0000000c"},
		{"trailing bytes after the name are ignored", "90 01 00 00 00000008 0000000d 0004 6a6f6273 ffff",
			"91 01 00 00 00000004 0000000d 00000000"},
		{"out of memory", "90 02 00 00 000003f2 0000000e 00000001 00000001 03e8 " + strings.Repeat("61", 1000),
			"91 02 82 00 0000000b 0000000e 4f75744f664d656d6f7279"},
		// Dump: consumption 0, maximum 10 in this interval, then the end.
		{"dump", "90 11 00 00 00000000 0000000f",
			"91 11 00 00 0000000e 0000000f 00000000 0000000a 0004 6a6f6273  91 11 00 00 00000000 0000000f"},
	}
	for _, st := range steps {
		want := unhex(t, st.resp)
		got := exchange(t, c, unhex(t, st.req), len(want))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s:\ngot  % x\nwant % x", st.name, got, want)
		}
	}
	// Stats is checked by TestStats; here its framing.
	got := exchange(t, c, unhex(t, "90 10 00 00 00000000 00000010"), wire.HeaderSize)
	h := wire.ParseHeader(got)
	if h.Magic != 0x91 || h.Opcode != wire.OpStats || h.Status != 0 || h.Opaque != 0x10 || h.BodyLen == 0 {
		t.Fatalf("stats header % x", got)
	}
}

func TestBadMagicClosesTheConnection(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := pipe(t, s)
	got := exchange(t, c, unhex(t, "80 01 00 00 00000000 00000005"), 29)
	equalBytes(t, "bad magic", got, "91 01 04 00 00000011 00000005 496e76616c696420617267756d656e7473")
	expectClosed(t, c)
}

// TestProtocolBreaksAreRateLimited: a client breaking the protocol on
// connection after connection gets one log line per period, not one each.
func TestProtocolBreaksAreRateLimited(t *testing.T) {
	var buf syncbuf.Buffer
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), Logger: zerolog.New(&buf)})
	for range 50 {
		c := pipe(t, s)
		exchange(t, c, unhex(t, "80 01 00 00 00000000 00000005"), 29)
		expectClosed(t, c)
	}
	if n := strings.Count(buf.String(), "counter client broke the protocol"); n != 1 {
		t.Fatalf("%d protocol lines for 50 broken connections, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), `"remote"`) {
		t.Errorf("the line does not name the client: %s", buf.String())
	}
}

func TestOverlongBodyClosesBeforeItIsSent(t *testing.T) {
	for _, tc := range []struct{ name, header, resp string }{
		{"get", "90 01 00 00 00010042 00000009", "91 01 04 00 00000011 00000009"},
		{"noop", "90 00 00 00 00000041 00000009", "91 00 04 00 00000011 00000009"},
		{"unknown", "90 55 00 00 7fffffff 00000009", "91 55 04 00 00000011 00000009"},
		{"unknown one over MaxUnknownBody", fmt.Sprintf("90 55 00 00 %08x 00000009", wire.MaxUnknownBody+1), "91 55 04 00 00000011 00000009"},
		// The extension opcodes' bodies are bounded by the stores' 255-byte
		// names and keys (plus the allowance), not by the 16-bit lengths.
		{"hit", fmt.Sprintf("90 20 00 00 %08x 00000009", 2+255+wire.BodyAllowance+1), "91 20 04 00 00000011 00000009"},
		{"visit", fmt.Sprintf("90 30 00 00 %08x 00000009", 4+2*257+wire.BodyAllowance+1), "91 30 04 00 00000011 00000009"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
			c := pipe(t, s)
			// Only the header is sent: the answer comes without the body.
			got := exchange(t, c, unhex(t, tc.header), 29)
			equalBytes(t, "answer", got, tc.resp+" 496e76616c696420617267756d656e7473")
			expectClosed(t, c)
		})
	}
}

// TestUnknownOpcodeLargeBody: an unknown opcode with the largest body
// accepted for it is answered Unknown command, byte for byte, and the
// requests pipelined after it are answered too: its body is skipped, not
// parsed.
func TestUnknownOpcodeLargeBody(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dial(t, listen(t, s))
	var req []byte
	for _, n := range []int{wire.MaxUnknownBody, 5000, 0} {
		req = wire.AppendHeader(req, wire.Header{Magic: wire.MagicRequest, Opcode: 0x99, BodyLen: uint32(n), Opaque: uint32(n)})
		// A body of request headers, which must not be taken for requests.
		req = append(req, bytes.Repeat(wire.AppendNoop(nil, 7), n/wire.HeaderSize+1)[:n]...)
	}
	req = wire.AppendGet(req, 1, "jobs")
	var want []byte
	for _, n := range []int{wire.MaxUnknownBody, 5000, 0} {
		want = wire.AppendError(want, 0x99, wire.StatusUnknownCommand, uint32(n))
	}
	want = wire.AppendError(want, wire.OpGet, wire.StatusNotFound, 1)
	got := exchange(t, c, req, len(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("answers:\ngot  % x\nwant % x", got, want)
	}
	equalBytes(t, "unknown opcode answer", got[:wire.HeaderSize+15], fmt.Sprintf("91 99 81 00 0000000f %08x 556e6b6e6f776e20636f6d6d616e64", wire.MaxUnknownBody))
}

func TestPipelined200InOneWrite(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dial(t, listen(t, s))
	var req, want []byte
	for i := range 200 {
		op := uint32(i)
		switch i % 4 {
		case 0:
			req = wire.AppendAcquire(req, op, "p", 1, 1000)
			want = wire.AppendUint32(want, wire.OpAcquire, op, 1)
		case 1:
			req = wire.AppendGet(req, op, "p")
			want = wire.AppendUint32(want, wire.OpGet, op, uint32(i/4+1))
		case 2:
			req = wire.AppendNoop(req, op)
			want = wire.AppendResponse(want, wire.OpNoop, wire.StatusOK, op, nil)
		case 3:
			req = wire.AppendRelease(req, op, "q", 0)
			want = wire.AppendError(want, wire.OpRelease, wire.StatusNotFound, op)
		}
	}
	got := exchange(t, c, req, len(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("pipelined answers differ:\ngot  % x\nwant % x", got, want)
	}
}

func TestOneByteAtATime(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := pipe(t, s)
	var req, want []byte
	req = wire.AppendAcquire(req, 1, "slow", 2, 5)
	want = wire.AppendUint32(want, wire.OpAcquire, 1, 2)
	req = wire.AppendGet(req, 2, "slow")
	want = wire.AppendUint32(want, wire.OpGet, 2, 2)
	req = wire.AppendRelease(req, 3, "slow", 2)
	want = wire.AppendResponse(want, wire.OpRelease, wire.StatusOK, 3, nil)
	go func() {
		for i := range req {
			if _, err := c.Write(req[i : i+1]); err != nil {
				return
			}
		}
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

// TestAnswersBeforeTheRestOfARequest: a client that sends a request and
// the start of the next, then waits for the first answer, gets it.
func TestAnswersBeforeTheRestOfARequest(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := pipe(t, s)
	next := wire.AppendNoop(nil, 2)
	req := append(wire.AppendNoop(nil, 1), next[:5]...)
	got := exchange(t, c, req, wire.HeaderSize)
	equalBytes(t, "first answer", got, "91 00 00 00 00000000 00000001")
	got = exchange(t, c, next[5:], wire.HeaderSize)
	equalBytes(t, "second answer", got, "91 00 00 00 00000000 00000002")
}

func TestReleaseRulesPerConnection(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := listen(t, s)
	a, b := dialClient(t, addr), dialClient(t, addr)
	cx := ctx(t)
	if _, err := a.Acquire(cx, "r", 3, 10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"b releases 1 held by a", b.Release(cx, "r", 1), wire.StatusNotAcquired},
		{"b releases 0 holding none", b.Release(cx, "r", 0), wire.StatusNotAcquired},
		{"a releases 4 of its 3", a.Release(cx, "r", 4), wire.StatusNotAcquired},
		{"a releases 0 while holding", a.Release(cx, "r", 0), nil},
		{"a releases 3", a.Release(cx, "r", 3), nil},
		{"a releases 0 after its holding reached 0", a.Release(cx, "r", 0), wire.StatusNotAcquired},
		{"release of a counter never acquired", a.Release(cx, "never", 0), wire.StatusNotFound},
	} {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil && tc.err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestAcquireDoesNotWrap(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	if _, err := c.Acquire(cx, "w", 0xFFFFFFFF, 0xFFFFFFFF); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(cx, "w", 1, 0xFFFFFFFF); !errors.Is(err, wire.StatusNotAvailable) {
		t.Fatalf("acquire past 2^32-1: %v, want Resource not available", err)
	}
	if v, err := c.Get(cx, "w"); v != 0xFFFFFFFF || err != nil {
		t.Fatalf("Get = %d, %v", v, err)
	}
	if err := c.Release(cx, "w", 0xFFFFFFFF); err != nil {
		t.Fatal(err)
	}
}

func TestCloseReleasesWithin100ms(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := listen(t, s)
	holder, watcher := dialClient(t, addr), dialClient(t, addr)
	cx := ctx(t)
	if _, err := holder.Acquire(cx, "held", 3, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Acquire(cx, "other", 1, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Acquire(cx, "held", 1, 4); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	eventually.True(t, 100*time.Millisecond, "release after close", func() bool {
		v1, err1 := watcher.Get(cx, "held")
		v2, err2 := watcher.Get(cx, "other")
		return err1 == nil && err2 == nil && v1 == 1 && v2 == 0
	})
	if _, err := watcher.Acquire(cx, "held", 3, 4); err != nil {
		t.Fatalf("released resources are not available again: %v", err)
	}
}

func TestRequestsBeforeCloseRunFirst(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := listen(t, s)
	raw := dial(t, addr)
	// Acquire and close without reading: the acquire runs, then its
	// release on close.
	if _, err := raw.Write(wire.AppendAcquire(nil, 1, "brief", 1, 1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	eventually.True(t, time.Second, "connection served and closed", func() bool {
		m := statsMap(s)
		return m["command:acquire"] == "1" && m["curr_connections"] == "0"
	})
	c := dialClient(t, addr)
	if v, err := c.Get(ctx(t), "brief"); v != 0 || err != nil {
		t.Fatalf("Get = %d, %v: want the counter at 0 after the auto-release", v, err)
	}
}

func TestStats(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), StatsInterval: 60 * time.Second})
	addr := listen(t, s)
	c := dialClient(t, addr)
	cx := ctx(t)
	c.Noop(cx)
	c.Acquire(cx, "a", 1, 1)
	c.Acquire(cx, "a", 1, 1) // not available: counted
	c.Acquire(cx, "b", 2, 5)
	c.Get(cx, "zz") // not found: counted
	c.Release(cx, "a", 1)
	p := c.Pipeline()
	p.Acquire("a", 0, 1) // invalid: not counted
	p.Get("")            // invalid: not counted
	if _, err := p.Exec(cx); err != nil {
		t.Fatal(err)
	}
	raw := dial(t, addr)
	exchange(t, raw, unhex(t, "90 66 00 00 00000000 00000001"), 27) // unknown: not counted
	dumpAll(t, c)
	checkStatsBytes(t, raw)
	stats, err := c.Stats(cx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range stats {
		names = append(names, st.Name)
	}
	want := "objects total_objects used_memory conflicts gc_count last_gc_elapsed total_gc_elapsed " +
		"curr_connections total_connections command:noop command:get command:acquire command:release " +
		"command:stats command:dump command:hit command:total command:add command:list command:visit command:leave command:active " +
		"command:whit command:wcount command:uadd command:ucount rejected_connections stats_interval reclaimed_objects"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("stats names:\ngot  %s\nwant %s", got, want)
	}
	m := statsMap(s)
	for name, v := range map[string]string{
		"objects": "2", "total_objects": "2", "used_memory": "288", "gc_count": "1",
		"curr_connections": "2", "total_connections": "2",
		"command:noop": "1", "command:get": "1", "command:acquire": "3", "command:release": "1",
		"command:stats": "2", "command:dump": "1", "rejected_connections": "0", "stats_interval": "60", "reclaimed_objects": "0",
	} {
		if m[name] != v {
			t.Errorf("%s = %q, want %q", name, m[name], v)
		}
	}
	for _, st := range stats {
		if _, err := strconv.ParseUint(st.Value, 10, 64); err != nil {
			t.Errorf("%s = %q is not a decimal number", st.Name, st.Value)
		}
	}
}

// checkStatsBytes sends a Stats request and checks the answer byte for
// byte, except the two GC timings, which only have to be decimal numbers.
func checkStatsBytes(t *testing.T, raw net.Conn) {
	t.Helper()
	want := [][2]string{
		{"objects", "2"}, {"total_objects", "2"}, {"used_memory", "288"}, {"conflicts", "0"},
		{"gc_count", "1"}, {"last_gc_elapsed", "*"}, {"total_gc_elapsed", "*"},
		{"curr_connections", "2"}, {"total_connections", "2"},
		{"command:noop", "1"}, {"command:get", "1"}, {"command:acquire", "3"}, {"command:release", "1"},
		{"command:stats", "0"}, {"command:dump", "1"},
		{"command:hit", "0"}, {"command:total", "0"}, {"command:add", "0"}, {"command:list", "0"}, {"command:visit", "0"}, {"command:leave", "0"}, {"command:active", "0"},
		{"command:whit", "0"}, {"command:wcount", "0"}, {"command:uadd", "0"}, {"command:ucount", "0"},
		{"rejected_connections", "0"}, {"stats_interval", "60"}, {"reclaimed_objects", "0"},
	}
	if _, err := raw.Write(unhex(t, "90 10 00 00 00000000 00000077")); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(raw, hdr); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, binary.BigEndian.Uint32(hdr[4:8]))
	if _, err := io.ReadFull(raw, got); err != nil {
		t.Fatal(err)
	}
	parsed, err := wire.ParseStats(got)
	if err != nil {
		t.Fatal(err)
	}
	timings := make(map[string]string)
	for _, st := range parsed {
		timings[st.Name] = st.Value
	}
	var body []byte
	for _, kv := range want {
		name, value := kv[0], kv[1]
		if value == "*" {
			value = timings[name]
			if _, err := strconv.ParseUint(value, 10, 64); err != nil {
				t.Fatalf("%s = %q", name, value)
			}
		}
		body = binary.BigEndian.AppendUint16(body, uint16(len(name)))
		body = binary.BigEndian.AppendUint16(body, uint16(len(value)))
		body = append(body, name...)
		body = append(body, value...)
	}
	wantHdr := unhex(t, "91 10 00 00 00000000 00000077")
	binary.BigEndian.PutUint32(wantHdr[4:8], uint32(len(body)))
	if !bytes.Equal(hdr, wantHdr) || !bytes.Equal(got, body) {
		t.Fatalf("stats answer:\ngot  % x % x\nwant % x % x", hdr, got, wantHdr, body)
	}
}

// TestGCAndMaxConsumptionAcrossBoundaries drives the interval clock by hand.
func TestGCAndMaxConsumptionAcrossBoundaries(t *testing.T) {
	clock := newFakeClock(day + 10)
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(clock.Now), Clock: clock.Now, StatsInterval: 3600 * time.Second})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(name string, n uint32) { t.Helper(); _, err := c.Acquire(cx, name, n, 100); must(err) }
	check := func(when string, want ...wire.DumpEntry) {
		t.Helper()
		got := dumpAll(t, c)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: dump %v, want %v", when, got, want)
		}
	}

	acquire("gone", 4)
	must(c.Release(cx, "gone", 4))
	acquire("kept", 7)
	must(c.Release(cx, "kept", 5))
	if n := s.RunGC(); n != 0 {
		t.Fatalf("GC inside the interval deleted %d", n)
	}
	check("first interval", wire.DumpEntry{Name: "gone", Consumption: 0, MaxConsumption: 4},
		wire.DumpEntry{Name: "kept", Consumption: 2, MaxConsumption: 7})

	clock.Set(day + 3600)
	check("after the boundary, before GC", wire.DumpEntry{Name: "gone", Consumption: 0, MaxConsumption: 0},
		wire.DumpEntry{Name: "kept", Consumption: 2, MaxConsumption: 2})
	if n := s.RunGC(); n != 1 {
		t.Fatalf("GC after the boundary deleted %d, want 1", n)
	}
	acquire("kept", 1)
	check("second interval", wire.DumpEntry{Name: "kept", Consumption: 3, MaxConsumption: 3})

	clock.Set(day + 2*3600 + 1)
	must(c.Release(cx, "kept", 3))
	check("first release of the third interval", wire.DumpEntry{Name: "kept", Consumption: 0, MaxConsumption: 3})
	s.RunGC()
	check("touched this interval: kept", wire.DumpEntry{Name: "kept", Consumption: 0, MaxConsumption: 3})
	clock.Set(day + 3*3600)
	s.RunGC()
	check("untouched for an interval: collected")
	if _, err := c.Get(cx, "kept"); !errors.Is(err, wire.StatusNotFound) {
		t.Fatalf("Get after GC: %v", err)
	}
}

func TestMaxConnections(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), MaxConnections: 2})
	addr := listen(t, s)
	cx := ctx(t)
	a, b := dialClient(t, addr), dialClient(t, addr)
	if err := a.Noop(cx); err != nil {
		t.Fatal(err)
	}
	if err := b.Noop(cx); err != nil {
		t.Fatal(err)
	}
	extra := dial(t, addr)
	expectClosed(t, extra)
	if m := statsMap(s); m["rejected_connections"] != "1" || m["curr_connections"] != "2" {
		t.Fatalf("stats %v", m)
	}
	a.Close()
	eventually.True(t, time.Second, "slot freed", func() bool { return statsMap(s)["curr_connections"] == "1" })
	c := dialClient(t, addr)
	if err := c.Noop(cx); err != nil {
		t.Fatalf("a freed slot is not reusable: %v", err)
	}
}

// TestHammer: 50 connections acquire and release 10 names at once; then
// half of them close, and each counter must equal exactly what the open
// connections hold.
func TestHammer(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	addr := listen(t, s)
	const conns, rounds, maximum = 50, 200, 300
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("hammer-%d", i)
	}
	clients := make([]*client.Client, conns)
	held := make([]map[string]uint32, conns)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		clients[i] = dialClient(t, addr)
		held[i] = make(map[string]uint32)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, h := clients[i], held[i]
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range rounds {
				name := names[rng.IntN(len(names))]
				n := uint32(rng.IntN(3))
				if rng.IntN(2) == 0 {
					_, err := c.Acquire(context.Background(), name, n+1, maximum)
					switch {
					case err == nil:
						h[name] += n + 1
					case !errors.Is(err, wire.StatusNotAvailable):
						errs <- err
						return
					}
				} else {
					err := c.Release(context.Background(), name, n)
					switch {
					case err == nil:
						h[name] -= n
					case n <= h[name] && h[name] > 0:
						errs <- fmt.Errorf("release %d of %d held: %v", n, h[name], err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := 0; i < conns; i += 2 {
		clients[i].Close()
	}
	eventually.True(t, 5*time.Second, "closed connections served out", func() bool {
		return statsMap(s)["curr_connections"] == strconv.Itoa(conns/2)
	})
	checker := dialClient(t, addr)
	for _, name := range names {
		var want uint32
		for i := 1; i < conns; i += 2 {
			want += held[i][name]
		}
		got, err := checker.Get(ctx(t), name)
		if err != nil || got != want {
			t.Errorf("%s = %d (%v), open connections hold %d", name, got, err, want)
		}
	}
}

// TestStalledClientDoesNotDelayOthers: a client that never reads its
// answers blocks only itself.
func TestStalledClientDoesNotDelayOthers(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), WriteTimeout: time.Hour})
	stalled := pipe(t, s)
	// net.Pipe has no buffer: the server's answer write blocks at once.
	go stalled.Write(wire.AppendAcquire(nil, 1, "st", 1, 10))
	eventually.True(t, 5*time.Second, "stalled request read", func() bool { return statsMap(s)["command:acquire"] == "1" })
	c := dialClient(t, listen(t, s))
	if v, err := c.Get(ctx(t), "st"); v != 1 || err != nil {
		t.Fatalf("another client is not served: %d, %v", v, err)
	}
	// Close must not hang on the stalled write; listen's cleanup checks it.
}

func TestWriteTimeoutDisconnects(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), WriteTimeout: 20 * time.Millisecond})
	stalled := pipe(t, s)
	got := exchange(t, stalled, wire.AppendAcquire(nil, 1, "wt", 2, 10), 16)
	equalBytes(t, "acquire", got, "91 02 00 00 00000004 00000001 00000002")
	go stalled.Write(wire.AppendNoop(nil, 2)) // its answer is never read
	c := dialClient(t, listen(t, s))
	eventually.True(t, 5*time.Second, "stalled client disconnected and released", func() bool {
		v, err := c.Get(ctx(t), "wt")
		return err == nil && v == 0
	})
}

func TestIdleTimeout(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), IdleTimeout: 20 * time.Millisecond})
	idle := pipe(t, s)
	exchange(t, idle, wire.AppendAcquire(nil, 1, "idle", 1, 1), 16)
	expectClosed(t, idle)
	c := dialClient(t, listen(t, s))
	eventually.True(t, 5*time.Second, "idle client released", func() bool {
		v, err := c.Get(ctx(t), "idle")
		return err == nil && v == 0
	})
}

func TestCloseEndsEverything(t *testing.T) {
	s, err := counters.NewServer(counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c := dialClient(t, ln.Addr().String())
	if _, err := c.Acquire(ctx(t), "x", 1, 1); err != nil {
		t.Fatal(err)
	}
	raw := pipe(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, counters.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	expectClosed(t, raw)
	if err := c.Noop(ctx(t)); err == nil {
		t.Fatal("a client of a closed server still gets answers")
	}
	if m := statsMap(s); m["curr_connections"] != "0" {
		t.Fatalf("connections left after Close: %v", m)
	}
	late := pipe(t, s)
	expectClosed(t, late)
	if err := s.Serve(ln); !errors.Is(err, counters.ErrServerClosed) {
		t.Fatalf("Serve after Close returned %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewServerRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts counters.ServerOptions
	}{
		{"negative max connections", counters.ServerOptions{Stores: counters.MemoryStores(nil), MaxConnections: -1}},
		{"negative buckets", counters.ServerOptions{Stores: counters.MemoryStores(nil), Buckets: -1}},
		{"interval under the minimum", counters.ServerOptions{Stores: counters.MemoryStores(nil), StatsInterval: 9 * time.Second}},
		{"negative write timeout", counters.ServerOptions{Stores: counters.MemoryStores(nil), WriteTimeout: -1}},
		{"negative idle timeout", counters.ServerOptions{Stores: counters.MemoryStores(nil), IdleTimeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := counters.NewServer(tc.opts); err == nil {
				s.Close()
				t.Fatal("NewServer accepted it")
			}
		})
	}
}

// countingObserver counts what it is told.
type countingObserver struct {
	mu       sync.Mutex
	requests map[string]int
	conns    int
}

func (o *countingObserver) OnRequest(op wire.Opcode, st wire.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests[fmt.Sprintf("%s/%s", op, st)]++
}

func (o *countingObserver) OnConn(delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conns += delta
}

func TestObserver(t *testing.T) {
	o := &countingObserver{requests: make(map[string]int)}
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil), Observer: o})
	c := pipe(t, s)
	req := wire.AppendNoop(nil, 1)
	req = wire.AppendGet(req, 2, "none")
	req = wire.AppendAcquire(req, 3, "x", 0, 0)
	req = wire.AppendDump(req, 4)
	exchange(t, c, req, 12+21+29+12)
	o.mu.Lock()
	got := fmt.Sprint(o.requests, " conns=", o.conns)
	o.mu.Unlock()
	if want := "map[acquire/Invalid arguments:1 dump/OK:1 get/Not found:1 noop/OK:1] conns=1"; got != want {
		t.Fatalf("observer saw %s, want %s", got, want)
	}
	c.Close()
	eventually.True(t, time.Second, "OnConn(-1)", func() bool { o.mu.Lock(); defer o.mu.Unlock(); return o.conns == 0 })
}
