package loadtest_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/loadtest"
)

// startCounters serves the real counter server on a loopback port.
func startCounters(t *testing.T) string {
	return counterstest.Start(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
}

func runCounters(t *testing.T, o loadtest.CountersOptions) *loadtest.Report {
	t.Helper()
	rep, err := loadtest.RunCounters(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestCountersAgainstServer(t *testing.T) {
	addr := startCounters(t)
	for _, tc := range []struct{ conns, depth int }{{1, 1}, {4, 32}, {3, 7}} {
		t.Run(fmt.Sprintf("%d×%d", tc.conns, tc.depth), func(t *testing.T) {
			rep := runCounters(t, loadtest.CountersOptions{
				Addr: addr, Ops: allOps,
				Conns: tc.conns, Depth: tc.depth, Names: 10, Requests: 2000,
			})
			if !rep.OK() || rep.Stopped != "done" || rep.Requests < 1999 || rep.Requests > 2000 || rep.Check.Checked != rep.Requests {
				t.Fatalf("stopped %q after %d requests (%d checked); problems %v", rep.Stopped, rep.Requests, rep.Check.Checked, rep.Check.Listed)
			}
			var names []string
			for _, l := range rep.Latency {
				names = append(names, l.Name)
			}
			if got := strings.Join(names, ","); got != "acquire,release,get,noop,hit,visit,whit,uadd" {
				t.Errorf("latency series %s", got)
			}
		})
	}
}

// fakeCounters is a counter server that answers like the real one, in
// memory, except where fault changes the bytes of the i-th response (from
// 0, over all connections) or drops it (nil).
type fakeCounters struct {
	fault func(i int, resp []byte) []byte

	mu     sync.Mutex // guards the fields below
	n      int
	totals map[string]uint64
	seen   map[string]map[string]bool
}

func startFake(t *testing.T, fault func(i int, resp []byte) []byte) string {
	t.Helper()
	f := &fakeCounters{fault: fault, totals: map[string]uint64{}, seen: map[string]map[string]bool{}}
	return tcptest.Serve(t, f.serve)
}

func (f *fakeCounters) serve(nc net.Conn) {
	held := map[string]uint32{}
	rd := wire.NewRequestReader(nc)
	for {
		fr, err := rd.Read()
		if err != nil {
			return
		}
		var resp []byte
		switch fr.Opcode {
		case wire.OpNoop:
			resp = wire.AppendResponse(nil, fr.Opcode, wire.StatusOK, fr.Opaque, nil)
		case wire.OpAcquire:
			req, _ := wire.ParseAcquire(fr.Body)
			held[string(req.Name)] += req.Resources
			resp = wire.AppendUint32(nil, fr.Opcode, fr.Opaque, req.Resources)
		case wire.OpRelease:
			req, _ := wire.ParseRelease(fr.Body)
			held[string(req.Name)] -= req.Resources
			resp = wire.AppendResponse(nil, fr.Opcode, wire.StatusOK, fr.Opaque, nil)
		case wire.OpGet:
			name, _ := wire.ParseGet(fr.Body)
			resp = wire.AppendUint32(nil, fr.Opcode, fr.Opaque, held[string(name)])
		case wire.OpHit:
			name, _ := wire.ParseHit(fr.Body)
			f.mu.Lock()
			f.totals[string(name)]++
			resp = wire.AppendUint64(nil, fr.Opcode, fr.Opaque, f.totals[string(name)])
			f.mu.Unlock()
		case wire.OpVisit:
			req, _ := wire.ParseVisit(fr.Body)
			f.mu.Lock()
			keys := f.seen[string(req.Name)]
			if keys == nil {
				keys = map[string]bool{}
				f.seen[string(req.Name)] = keys
			}
			isNew := !keys[string(req.Key)]
			keys[string(req.Key)] = true
			resp = wire.AppendUint32Flag(nil, fr.Opcode, fr.Opaque, uint32(len(keys)), isNew)
			f.mu.Unlock()
		case wire.OpWindowHit:
			req, _ := wire.ParseWindow(fr.Body)
			f.mu.Lock()
			resp = wire.AppendUint64(nil, fr.Opcode, fr.Opaque, f.totals["w:"+string(req.Name)])
			f.totals["w:"+string(req.Name)]++
			f.mu.Unlock()
		case wire.OpUniqueAdd:
			req, _ := wire.ParseUniqueAdd(fr.Body)
			f.mu.Lock()
			keys := f.seen["u:"+string(req.Name)]
			if keys == nil {
				keys = map[string]bool{}
				f.seen["u:"+string(req.Name)] = keys
			}
			changed := !keys[string(req.Keys[0])]
			keys[string(req.Keys[0])] = true
			resp = wire.AppendFlag(nil, fr.Opcode, fr.Opaque, changed)
			f.mu.Unlock()
		default:
			resp = wire.AppendError(nil, fr.Opcode, wire.StatusUnknownCommand, fr.Opaque)
		}
		f.mu.Lock()
		i := f.n
		f.n++
		f.mu.Unlock()
		if f.fault != nil {
			resp = f.fault(i, resp)
		}
		if resp != nil {
			if _, err := nc.Write(resp); err != nil {
				return
			}
		}
	}
}

var allOps = []loadtest.Op{loadtest.OpAcquire, loadtest.OpGet, loadtest.OpNoop, loadtest.OpHit, loadtest.OpVisit, loadtest.OpWindowHit, loadtest.OpUniqueAdd}

func TestCountersEveryWorkloadAgainstFake(t *testing.T) {
	addr := startFake(t, nil)
	rep := runCounters(t, loadtest.CountersOptions{Addr: addr, Ops: allOps, Conns: 2, Depth: 5, Requests: 1000})
	if !rep.OK() || rep.Requests < 999 || len(rep.Latency) != 8 {
		t.Fatalf("%d requests, latency %v, problems %v", rep.Requests, rep.Latency, rep.Check.Listed)
	}
}

// TestCountersCheckerCatchesBrokenServer alters single responses of a
// server that is otherwise right: each alteration must be reported as its
// kind of problem, on the right request.
func TestCountersCheckerCatchesBrokenServer(t *testing.T) {
	tests := []struct {
		name  string
		fault func(resp []byte) []byte
		kind  loadtest.ProblemKind
		got   string
		on    bool // alter every response from the victim on, not just the victim
	}{
		{"wrong body", func(r []byte) []byte { r[len(r)-1] ^= 0xff; return r }, loadtest.WrongBody, "", false},
		{"wrong status", func(r []byte) []byte {
			h := wire.ParseHeader(r)
			return wire.AppendError(nil, h.Opcode, wire.StatusNotAvailable, h.Opaque)
		}, loadtest.WrongStatus, "Resource not available", false},
		{"wrong opaque", func(r []byte) []byte { r[11]++; return r }, loadtest.OutOfStep, "opaque", false},
		{"wrong opcode", func(r []byte) []byte { r[1] = byte(wire.OpStats); return r }, loadtest.OutOfStep, "stats", false},
		{"bad magic", func(r []byte) []byte { r[0] = 0x90; return r }, loadtest.Broken, "bad magic", false},
		{"no more answers", func([]byte) []byte { return nil }, loadtest.Broken, "timeout", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const victim = 5 // the first hit: after acquire, release, acquire (own), get, noop
			addr := startFake(t, func(i int, r []byte) []byte {
				if i == victim || tc.on && i > victim {
					return tc.fault(r)
				}
				return r
			})
			rep := runCounters(t, loadtest.CountersOptions{Addr: addr, Ops: allOps, Depth: 3, Requests: 40, Timeout: 300 * time.Millisecond})
			if rep.Check.Wrong() != 1 || rep.Check.Problems[tc.kind] != 1 {
				t.Fatalf("problems %v, want one %s; listed %v", rep.Check.Problems, tc.kind, rep.Check.Listed)
			}
			p := rep.Check.Listed[0]
			if !strings.Contains(p.Subject, "hit opaque 6") || !strings.Contains(p.Got, tc.got) {
				t.Errorf("reported %v, want it about hit opaque 6 with %q", p, tc.got)
			}
			if tc.kind == loadtest.Broken || tc.kind == loadtest.OutOfStep {
				if rep.Requests >= 40 || !strings.Contains(p.Got, "unanswered") {
					t.Errorf("%d requests answered after the stream broke; problem %v", rep.Requests, p)
				}
			}
		})
	}
}

func TestCountersStopsAndRefuses(t *testing.T) {
	addr := startCounters(t)
	rep := runCounters(t, loadtest.CountersOptions{Addr: addr, Ops: []loadtest.Op{loadtest.OpNoop}, Requests: 1 << 40, Duration: 100 * time.Millisecond, Depth: 4})
	if rep.Stopped != "duration" || !rep.OK() || rep.Requests == 0 {
		t.Errorf("stopped %q after %d requests, problems %v", rep.Stopped, rep.Requests, rep.Check.Listed)
	}
	for _, o := range []loadtest.CountersOptions{
		{Addr: "192.0.2.1:11215"},
		{Addr: "example.com:11215"},
		{Addr: addr, Conns: -1},
		{Addr: addr, Ops: []loadtest.Op{"burn"}},
	} {
		if _, err := loadtest.RunCounters(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := loadtest.ParseOps("acquire, hit,visit"); err != nil {
		t.Error(err)
	}
}

// TestSharedMaximumTwoInstances runs the acquire workload with a shared
// maximum against two instances on one Redis: no grant beyond the
// maximum, and both agree at the end with what the connections hold.
func TestSharedMaximumTwoInstances(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		a := counterstest.StartRedis(t, tg.NoRetryClient(t, ""), prefix, 0)
		b := counterstest.StartRedis(t, tg.NoRetryClient(t, ""), prefix, 0)
		// miniredis builds a Lua interpreter per call under -race: 3,000
		// requests took 2.5 s there idle, 9 s on a busy machine. 1,000
		// still give each of the 12 connections about 40 acquire and
		// release pairs, against the two instances.
		requests := int64(3000)
		if tg.Kind == redistest.Mini {
			requests = 1000
		}
		rep := runCounters(t, loadtest.CountersOptions{
			Addr: a + "," + b, Ops: []loadtest.Op{loadtest.OpAcquire}, Maximum: 3,
			Conns: 12, Names: 2, Requests: requests,
		})
		if !rep.OK() || rep.Stopped != "done" || rep.Requests < requests-10 {
			t.Fatalf("stopped %q after %d requests; problems %v", rep.Stopped, rep.Requests, rep.Check.Listed)
		}
		if !strings.Contains(rep.Scenario, "2 servers") {
			t.Errorf("scenario %q", rep.Scenario)
		}
	})
}

// TestSharedMaximumClosedByServer: connections the server side closes
// (here a proxy cutting them, as a server closes a connection whose lease
// it lost) stop counting their units as held; the reports say so, and the
// run is no failure. The cut races the connections: on a loaded machine a
// connection reads an answer the proxy delivered before the cut only after
// others were granted what the server freed at the cut.
func TestSharedMaximumClosedByServer(t *testing.T) {
	p, err := faultproxy.New(startCounters(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		// Once the run's 4 connections are open (bounded: the run lasts
		// 10 s), every one of them is cut.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(10 * time.Second); p.Open() < 4 && time.Now().Before(end); {
			<-tick.C
		}
		p.Drop()
	}()
	rep := runCounters(t, loadtest.CountersOptions{
		Addr: p.Addr(), Ops: []loadtest.Op{loadtest.OpAcquire}, Maximum: 2,
		Conns: 4, Names: 1, Duration: 10 * time.Second,
	})
	<-cut
	// Together the connections may have held more than the maximum when
	// cut: they see the cut one by one, and one that has seen it no longer
	// holds what another is granted after. Each holds at most 2 (it
	// releases after 2 acquires).
	c := rep.ClosedByServer
	if c == nil || c.Connections != 4 || c.Units > 4*2 {
		t.Fatalf("closed by server %+v, want 4 connections holding at most 2 units each", c)
	}
	if rep.Stopped != "connections failed" || rep.Check.Problems[loadtest.Broken] != 0 || rep.Check.Problems[loadtest.OverMaximum] != 0 {
		t.Fatalf("stopped %q; problems %v", rep.Stopped, rep.Check.Listed)
	}
	var table, js strings.Builder
	rep.WriteTable(&table)
	rep.WriteJSON(&js)
	if !strings.Contains(table.String(), "closed by server: 4 connections holding") {
		t.Errorf("table lacks the closed connections:\n%s", table.String())
	}
	if !strings.Contains(js.String(), `"closed_by_server": {`) || !strings.Contains(js.String(), `"connections": 4`) {
		t.Errorf("JSON lacks closed_by_server:\n%s", js.String())
	}
}

// splitRun is how long a run against split counters lasts: the servers
// grant too much only while holds on both overlap, which a run of a few
// hundred requests (10 ms without the race detector) may finish before the
// connections' goroutines first interleave; a run over many scheduler
// turns sees them overlap.
const splitRun = 300 * time.Millisecond

// TestSharedMaximumCatchesSplitCounters: two instances that each keep
// their own counters (memory) grant the same unit twice, and the check
// says so.
func TestSharedMaximumCatchesSplitCounters(t *testing.T) {
	a, b := startCounters(t), startCounters(t)
	rep := runCounters(t, loadtest.CountersOptions{
		Addr: a + "," + b, Ops: []loadtest.Op{loadtest.OpAcquire}, Maximum: 1,
		Conns: 4, Names: 1, Requests: 0, Duration: splitRun,
	})
	if rep.OK() || rep.Check.Problems[loadtest.OverMaximum] == 0 {
		t.Fatalf("split counters not caught: %+v", rep.Check)
	}
}

// TestCountersScenario: the header names what the run does, in the right
// number: shared names only with the acquire workload, the request budget
// and the time limit when there is one.
func TestCountersScenario(t *testing.T) {
	addr := startCounters(t)
	for _, tc := range []struct {
		o    loadtest.CountersOptions
		want string
	}{
		{loadtest.CountersOptions{Ops: []loadtest.Op{loadtest.OpHit, loadtest.OpVisit}, Requests: 10},
			"hit+visit over 1 connection × depth 1, 10 requests"},
		{loadtest.CountersOptions{Ops: []loadtest.Op{loadtest.OpNoop}, Conns: 2, Depth: 3, Requests: 1, Duration: time.Minute},
			"noop over 2 connections × depth 3, 1 request, at most 1m0s"},
		{loadtest.CountersOptions{Ops: []loadtest.Op{loadtest.OpAcquire}, Names: 1, Requests: 10},
			"acquire over 1 connection × depth 1, 1 shared name, 10 requests"},
		{loadtest.CountersOptions{Ops: []loadtest.Op{loadtest.OpAcquire}, Maximum: 2, Conns: 2, Requests: 0, Duration: 50 * time.Millisecond},
			"acquire with a shared maximum of 2 over 2 connections, 1000 shared names, at most 50ms"},
	} {
		tc.o.Addr = addr
		if rep := runCounters(t, tc.o); rep.Scenario != tc.want {
			t.Errorf("scenario %q, want %q", rep.Scenario, tc.want)
		}
	}
}

// TestCountersRefusalsNameTheOption: each bad option is named in its own
// error, without the package's name before it.
func TestCountersRefusalsNameTheOption(t *testing.T) {
	for _, tc := range []struct {
		o    loadtest.CountersOptions
		want string
	}{
		{loadtest.CountersOptions{Conns: -3}, "-conns -3: must be at least 1"},
		{loadtest.CountersOptions{Depth: loadtest.MaxDepth + 1}, "-depth 100001: must be at most 100000"},
		{loadtest.CountersOptions{Duration: -time.Second}, "-duration -1s: must not be negative"},
		{loadtest.CountersOptions{Addr: "192.0.2.1:11215"}, "-addr: 192.0.2.1 is not on this machine's loopback"},
	} {
		_, err := loadtest.RunCounters(context.Background(), tc.o)
		if err == nil || strings.Contains(err.Error(), "loadtest:") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.o, err, tc.want)
		}
	}
}

// TestCountersProgressRate: the last progress line's rate is the report's,
// both over the time spent sending.
func TestCountersProgressRate(t *testing.T) {
	var progress strings.Builder
	rep := runCounters(t, loadtest.CountersOptions{Addr: startCounters(t), Ops: []loadtest.Op{loadtest.OpNoop}, Requests: 500, Progress: &progress})
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	want := fmt.Sprintf("requests %d/500  %.0f/s  ", rep.Requests, rep.RequestsPerSecond())
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, want) {
		t.Errorf("last progress line %q, want it to begin %q", last, want)
	}
}
