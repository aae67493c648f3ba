package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// An Op is one unit of counter work, repeated by every connection.
type Op string

// The counter workloads.
const (
	// OpAcquire acquires one resource of one of the shared names and
	// releases it: two requests, the pair of the counter benchmarks.
	OpAcquire Op = "acquire"
	// OpGet reads a counter the connection holds, so the value is known:
	// connection i holds i+1 resources of its own counter (acquired by
	// its first get unit).
	OpGet Op = "get"
	// OpNoop is a Noop.
	OpNoop Op = "noop"
	// OpHit hits the connection's own access counter, so every total is
	// known: 1, 2, 3, …
	OpHit Op = "hit"
	// OpVisit visits the connection's own participant counter with keys
	// k0 … k(visitKeys−1) in turn, so every answer (active, new) is known.
	OpVisit Op = "visit"
	// OpWindowHit hits the connection's own window counter (a day's
	// window), so every answer is known: 0, 1, 2, …
	OpWindowHit Op = "whit"
	// OpUniqueAdd adds keys to the connection's own unique counter, in
	// pairs: a new key (the first makes the estimate change; a later one
	// may or may not), then the same key again, which must change nothing.
	OpUniqueAdd Op = "uadd"
)

// opcodes are the opcodes the workloads send, in the order the report
// lists them.
var opcodes = []wire.Opcode{wire.OpAcquire, wire.OpRelease, wire.OpGet, wire.OpNoop, wire.OpHit, wire.OpVisit, wire.OpWindowHit, wire.OpUniqueAdd}

// ParseOps parses a comma-separated list of workloads, such as
// "acquire,get".
func ParseOps(s string) ([]Op, error) {
	var ops []Op
	for _, f := range strings.Split(s, ",") {
		switch op := Op(strings.TrimSpace(f)); op {
		case OpAcquire, OpGet, OpNoop, OpHit, OpVisit, OpWindowHit, OpUniqueAdd:
			ops = append(ops, op)
		default:
			return nil, fmt.Errorf("unknown counter workload %q (want acquire, get, noop, hit, visit, whit or uadd)", f)
		}
	}
	return ops, nil
}

// CountersOptions configure RunCounters. Zero fields mean the documented
// defaults.
type CountersOptions struct {
	// Addr is the counter server, host:port, or several, comma-separated:
	// connection i talks to server i mod n.
	Addr string
	// Ops are the workloads; each connection cycles through them
	// (default acquire).
	Ops []Op
	// Conns connections (default 1) each keep up to Depth requests in
	// flight (default 1).
	Conns, Depth int
	// Names is how many shared counter names OpAcquire cycles through
	// (default 1000).
	Names int
	// Requests is how many requests to send in all (default 100000, but
	// no limit when Duration is set: the run then lasts Duration); one
	// fewer when the last one would split an acquire+release pair.
	Requests int64
	// Duration stops sending after that long; zero means no limit.
	Duration time.Duration
	// Timeout bounds dialing and the wait for each response (default 5s).
	Timeout time.Duration
	// AllowRemote permits a server outside the loopback range.
	AllowRemote bool
	// Progress, if not nil, receives the live progress line.
	Progress io.Writer
	// Maximum, when not 0, makes OpAcquire (which must then be the only
	// workload) check a shared maximum: each connection acquires 1 of a
	// shared name with this maximum, one request at a time (Depth is
	// unused), holds it for a while, and releases what it holds. The run
	// tracks what its connections hold: a grant that takes it past
	// Maximum is an OverMaximum problem (a refusal, 0x21, is a correct
	// answer), and at the end every server's consumption of every name
	// must equal what the connections hold (WrongConsumption). The run
	// must be the only client of its names (they are unique to the run).
	Maximum uint32
}

func (o *CountersOptions) setDefaults() {
	if len(o.Ops) == 0 {
		o.Ops = []Op{OpAcquire}
	}
	setDefault(&o.Conns, DefaultConns)
	setDefault(&o.Depth, DefaultDepth)
	setDefault(&o.Names, DefaultNames)
	if o.Duration == 0 {
		setDefault(&o.Requests, DefaultRequests)
	}
	setDefault(&o.Timeout, DefaultCounterTimeout)
}

// Validate checks o's values, each bad one in an error of its own (they
// are joined), named by its flag as `vkcounter loadtest counters` takes
// it: the one check of the options, as CallbackOptions.Validate is.
func (o *CountersOptions) Validate() error {
	errs := []error{
		firstError(atLeast("conns", o.Conns, 1), atMost("conns", o.Conns, MaxConns)),
		firstError(atLeast("depth", o.Depth, 1), atMost("depth", o.Depth, MaxDepth)),
		atLeast("names", o.Names, 1),
		atLeast("requests", o.Requests, 0), // 0: until -duration ends
		atLeast("duration", o.Duration, 0), // 0: until -requests are sent
		positive("timeout", o.Timeout),
	}
	if o.Requests == 0 && o.Duration == 0 {
		errs = append(errs, errors.New("-requests 0 runs until -duration: give -duration too"))
	}
	for _, op := range o.Ops {
		if _, err := ParseOps(string(op)); err != nil {
			errs = append(errs, fmt.Errorf("-op: %w", err))
		}
	}
	if o.Maximum > 0 && (len(o.Ops) != 1 || o.Ops[0] != OpAcquire) {
		errs = append(errs, errors.New("-max checks the acquire workload: give -op acquire alone"))
	}
	if o.Addr != "" {
		for _, a := range o.addrs() {
			errs = append(errs, checkAddr("addr", a, o.AllowRemote))
		}
	}
	return errors.Join(errs...)
}

// addrs returns the servers of o.Addr.
func (o *CountersOptions) addrs() []string { return strings.Split(o.Addr, ",") }

// An expect is a request in flight and the one response that may answer
// it: that opcode and opaque, status OK, and exactly that body.
type expect struct {
	op     wire.Opcode
	opaque uint32
	want   body
	// anyFlag accepts either flag byte instead of want: a new key's UAdd
	// may or may not raise a register.
	anyFlag bool
	sent    time.Time
	name    string // the counter, for problem reports
	end     int    // where the request ends in the buffer it was built in
}

// A body is an expected response body; all of them fit 8 bytes, so
// expecting one allocates nothing.
type body struct {
	b [8]byte
	n uint8
}

func (b *body) bytes() []byte { return b.b[:b.n] }

// u32 is the body of Get and Acquire, u64 of Hit, u32Flag of Visit.
func u32(v uint32) (b body) {
	binary.BigEndian.PutUint32(b.b[:], v)
	b.n = 4
	return b
}

func u64(v uint64) (b body) {
	binary.BigEndian.PutUint64(b.b[:], v)
	b.n = 8
	return b
}

// flagBody is the body of UAdd.
func flagBody(v bool) (b body) {
	if v {
		b.b[0] = 1
	}
	b.n = 1
	return b
}

func u32Flag(v uint32, flag bool) body {
	b := u32(v)
	if flag {
		b.b[4] = 1
	}
	b.n = 5
	return b
}

// countersRun is one run of RunCounters.
type countersRun struct {
	o      CountersOptions
	runID  string
	names  []string // shared counters of OpAcquire
	keys   []string // participant keys of OpVisit
	start  time.Time
	budget atomic.Int64 // requests left to send
	spent  atomic.Bool  // a connection found the budget spent
	done   atomic.Int64 // responses checked
	sent   atomic.Int64 // how long sending lasted (Report.Elapsed), set once it ended

	mu    sync.Mutex // guards check and the fields of a shared maximum below
	check Check
	// With a shared maximum: the connections the server closed and what
	// they held, the counts above the maximum to settle at the end, and
	// those the closed connections explained.
	closedConns, closedUnits int64
	closed                   []closedHolding
	overs                    []overCount
	excused                  int64

	// held counts, per shared name, what the run's connections hold, with
	// a shared maximum.
	held []atomic.Int64
}

// scenario describes the run for the report: the workloads, the
// connections, the shared names (of the acquire workload alone), the
// request budget and the time limit.
func (r *countersRun) scenario(servers int) string {
	o := r.o
	conns := plural(o.Conns, "connection", "connections")
	s := fmt.Sprintf("%s over %s × depth %d", joinOps(o.Ops), conns, o.Depth)
	if o.Maximum > 0 { // one request at a time: Depth is unused
		s = fmt.Sprintf("acquire with a shared maximum of %d over %s", o.Maximum, conns)
	}
	if slices.Contains(o.Ops, OpAcquire) {
		s += ", " + plural(o.Names, "shared name", "shared names")
	}
	if o.Requests > 0 {
		s += ", " + plural(o.Requests, "request", "requests")
	}
	if o.Duration > 0 {
		s += ", at most " + o.Duration.String()
	}
	if servers > 1 {
		s += fmt.Sprintf(", %d servers", servers)
	}
	return s
}

// RunCounters drives a counter server with the workloads of o over
// o.Conns connections, each pipelining up to o.Depth requests, and checks
// every response: its magic, opcode, opaque, status and body. It stops
// after o.Requests requests or o.Duration.
//
// Setup failures (bad options, a target outside the loopback, a server
// that cannot be reached) are errors; wrong answers are in the Report.
func RunCounters(ctx context.Context, o CountersOptions) (*Report, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Addr == "" {
		return nil, errors.New("no counter server address")
	}
	runID, err := newRunID()
	if err != nil {
		return nil, err
	}
	r := &countersRun{o: o, runID: runID, check: newCheck(counterKinds)}
	r.names = make([]string, o.Names)
	for i := range r.names {
		r.names[i] = fmt.Sprintf("lt%s:%d", runID, i)
	}
	r.keys = make([]string, visitKeys)
	for i := range r.keys {
		r.keys[i] = fmt.Sprintf("k%d", i)
	}
	r.budget.Store(o.Requests)
	if o.Requests == 0 {
		r.budget.Store(math.MaxInt64) // until the duration ends
	}
	r.held = make([]atomic.Int64, len(r.names))

	addrs := o.addrs()
	conns := make([]*counterConn, o.Conns)
	for i := range conns {
		d := net.Dialer{Timeout: o.Timeout}
		nc, err := d.DialContext(ctx, "tcp", addrs[i%len(addrs)])
		if err != nil {
			for _, c := range conns[:i] {
				c.nc.Close()
			}
			return nil, fmt.Errorf("connect to the counter server: %w", err)
		}
		conns[i] = &counterConn{r: r, id: i, nc: nc, own: fmt.Sprintf("lt%s:conn%d", runID, i)}
	}
	r.start = time.Now()
	for _, c := range conns {
		c.series = map[wire.Opcode]*series{}
		for _, op := range opcodes {
			c.series[op] = newSeries(op.String(), r.start)
		}
	}

	sendCtx, cancel := context.WithCancel(ctx)
	if o.Duration > 0 {
		sendCtx, cancel = context.WithTimeout(ctx, o.Duration)
	}
	defer cancel()
	prog := startProgress(o.Progress, func() string {
		var h Histogram
		for _, c := range conns {
			for _, s := range c.series {
				snap := s.snapshot()
				h.Merge(&snap)
			}
		}
		r.mu.Lock()
		wrong := r.check.Wrong()
		r.mu.Unlock()
		return statusLine("requests", r.done.Load(), o.Requests, sinceOr(r.start, &r.sent), wrong, h.Quantile(0.99))
	})
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.Maximum > 0 {
				c.runShared(sendCtx)
			} else {
				c.run(sendCtx)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	r.sent.Store(int64(elapsed))
	if o.Maximum > 0 {
		r.settleOvers()
		r.checkConsumption(ctx, addrs)
	}
	stopped := "done"
	switch {
	case r.spent.Load():
	case ctx.Err() != nil:
		stopped = "interrupted"
	case sendCtx.Err() != nil:
		stopped = "duration"
	default:
		stopped = "connections failed"
	}
	prog.Stop()
	for _, c := range conns {
		c.nc.Close()
	}

	rep := &Report{
		Tool:     "counters",
		Scenario: r.scenario(len(addrs)),
		Target:   o.Addr, Started: r.start, Elapsed: elapsed, Stopped: stopped,
		Requests: r.done.Load(), Check: r.check,
	}
	if o.Maximum > 0 {
		rep.ClosedByServer = &ClosedByServer{Connections: r.closedConns, Units: r.closedUnits, Excused: r.excused}
	}
	rep.Check.Checked = rep.Requests
	rep.Errors = rep.Check.Wrong()
	for _, op := range opcodes {
		var parts []chartSeries
		for _, c := range conns {
			parts = append(parts, c.series[op].chart())
		}
		if ch := mergeCharts(op.String(), parts); ch.Hist.Count() > 0 {
			rep.charts = append(rep.charts, ch)
			rep.Latency = append(rep.Latency, ch.Hist.Summary(op.String()))
		}
	}
	return rep, nil
}

func joinOps(ops []Op) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = string(op)
	}
	return strings.Join(s, "+")
}

func (r *countersRun) add(p Problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check.add(p)
}

// A counterConn is one connection: a writer goroutine keeps up to Depth
// requests in flight, and the reader checks their responses in order.
type counterConn struct {
	r      *countersRun
	id     int
	nc     net.Conn
	series map[wire.Opcode]*series // per connection, so recording never contends

	own    string // the connection's own counter (of each kind)
	opaque uint32
	units  int  // workload units generated
	holds  bool // the connection holds its own counter, for OpGet
	hits   int  // hits sent
	visits int  // visits sent
	whits  int  // window hits sent
	uadds  int  // unique adds sent
}

// next appends the requests of the next workload unit to dst, and their
// expectations to exps. It returns false when the request budget is spent.
func (c *counterConn) next(dst []byte, exps []expect) ([]byte, []expect, bool) {
	op := c.r.o.Ops[c.units%len(c.r.o.Ops)]
	need := int64(1)
	if op == OpAcquire || (op == OpGet && !c.holds) {
		need = 2
	}
	if c.r.budget.Add(-need) < 0 {
		c.r.budget.Add(need) // leave it to a connection whose next unit is smaller
		c.r.spent.Store(true)
		return dst, exps, false
	}
	// add expects the response to the request whose encoding follows, and
	// returns its opaque; done marks where that encoding ended.
	add := func(op wire.Opcode, name string, want body) uint32 {
		c.opaque++
		exps = append(exps, expect{op: op, opaque: c.opaque, name: name, want: want})
		return c.opaque
	}
	done := func() { exps[len(exps)-1].end = len(dst) }
	switch op {
	case OpAcquire:
		name := c.r.names[(c.units*c.r.o.Conns+c.id)%len(c.r.names)]
		dst = wire.AppendAcquire(dst, add(wire.OpAcquire, name, u32(1)), name, 1, acquireMaximum)
		done()
		dst = wire.AppendRelease(dst, add(wire.OpRelease, name, body{}), name, 1)
		done()
	case OpGet:
		name, held := c.own, uint32(c.id+1)
		if !c.holds {
			dst = wire.AppendAcquire(dst, add(wire.OpAcquire, name, u32(held)), name, held, held)
			done()
			c.holds = true
		}
		dst = wire.AppendGet(dst, add(wire.OpGet, name, u32(held)), name)
		done()
	case OpNoop:
		dst = wire.AppendNoop(dst, add(wire.OpNoop, "", body{}))
		done()
	case OpHit:
		c.hits++
		name := c.own
		dst = wire.AppendHit(dst, add(wire.OpHit, name, u64(uint64(c.hits))), name)
		done()
	case OpVisit:
		name, key := c.own, c.r.keys[c.visits%visitKeys]
		isNew := c.visits < visitKeys
		c.visits++
		want := u32Flag(uint32(min(c.visits, visitKeys)), isNew)
		dst = wire.AppendVisit(dst, add(wire.OpVisit, name, want), visitTimeout, name, key)
		done()
	case OpWindowHit:
		name := c.own
		dst = wire.AppendWindowHit(dst, add(wire.OpWindowHit, name, u64(uint64(c.whits))), windowSeconds, name)
		done()
		c.whits++
	case OpUniqueAdd:
		name, key := c.own, "u"+strconv.Itoa(c.uadds/2)
		// The first key changes the empty counter, a repeat never does.
		dst = wire.AppendUniqueAdd(dst, add(wire.OpUniqueAdd, name, flagBody(c.uadds == 0)), name, []string{key})
		exps[len(exps)-1].anyFlag = c.uadds > 0 && c.uadds%2 == 0
		done()
		c.uadds++
	}
	c.units++
	return dst, exps, true
}

// run sends and checks until the budget is spent or ctx ends, then waits
// for the responses still due.
func (c *counterConn) run(ctx context.Context) {
	slots := make(chan struct{}, c.r.o.Depth) // one per request in flight
	queue := make(chan expect, c.r.o.Depth)   // never blocks: slots bound it
	broken := make(chan struct{})
	go c.write(ctx, slots, queue, broken)
	c.read(slots, queue, broken)
}

// write generates requests, keeping at most Depth unanswered: it buffers
// them and flushes whenever the window is full or the work is done.
func (c *counterConn) write(ctx context.Context, slots chan<- struct{}, queue chan<- expect, broken <-chan struct{}) {
	defer close(queue)
	w := bufio.NewWriterSize(c.nc, 32<<10)
	defer w.Flush()
	var buf []byte
	var exps []expect
	for {
		var more bool
		buf, exps, more = c.next(buf[:0], exps[:0])
		if !more {
			return
		}
		start := 0
		for i := range exps {
			select {
			case slots <- struct{}{}:
			default:
				// The window is full: send what is buffered, then wait
				// for a response to free a slot.
				if w.Flush() != nil {
					return
				}
				select {
				case slots <- struct{}{}:
				case <-broken:
					return
				case <-ctx.Done():
					return
				}
			}
			exps[i].sent = time.Now()
			queue <- exps[i]
			if _, err := w.Write(buf[start:exps[i].end]); err != nil {
				return
			}
			start = exps[i].end
		}
		select {
		case <-ctx.Done():
			return
		default:
		}
	}
}

// read checks the response to each request in flight, in order. On the
// first response that breaks the stream it closes the connection and
// reports the requests left unanswered.
func (c *counterConn) read(slots <-chan struct{}, queue <-chan expect, broken chan<- struct{}) {
	rd := wire.NewResponseReader(c.nc)
	fail := func(p Problem) {
		close(broken)
		c.nc.Close()
		unanswered := 0
		for range queue {
			unanswered++
		}
		p.Got += " (" + plural(unanswered, "more request", "more requests") + " unanswered)"
		c.r.add(p)
	}
	for e := range queue {
		c.nc.SetReadDeadline(time.Now().Add(c.r.o.Timeout))
		f, err := rd.Read()
		if err != nil {
			fail(Problem{Kind: Broken, Subject: c.subject(&e), Want: "a response", Got: err.Error()})
			return
		}
		c.series[e.op].record(e.sent, time.Since(e.sent))
		c.r.done.Add(1)
		<-slots
		switch {
		case f.Opcode != e.op || f.Opaque != e.opaque:
			fail(Problem{Kind: OutOfStep, Subject: c.subject(&e), Want: fmt.Sprintf("opcode %s opaque %d", e.op, e.opaque), Got: fmt.Sprintf("opcode %s opaque %d", f.Opcode, f.Opaque)})
			return
		case f.Status != wire.StatusOK:
			c.r.add(Problem{Kind: WrongStatus, Subject: c.subject(&e), Want: "OK", Got: fmt.Sprintf("%#02x %q", byte(f.Status), f.Body)})
		case e.anyFlag && len(f.Body) == 1 && f.Body[0] <= 1:
		case !bytes.Equal(f.Body, e.want.bytes()):
			c.r.add(Problem{Kind: WrongBody, Subject: c.subject(&e), Want: fmt.Sprintf("% x", e.want.bytes()), Got: fmt.Sprintf("% x", f.Body)})
		}
	}
}

func (c *counterConn) subject(e *expect) string {
	s := fmt.Sprintf("connection %d, %s opaque %d", c.id, e.op, e.opaque)
	if e.name != "" {
		s += fmt.Sprintf(" of %q", e.name)
	}
	return s
}
