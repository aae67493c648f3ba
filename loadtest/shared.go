package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// sharedHold is how many units a connection of a shared-maximum run
// acquires before it releases what it holds.
const sharedHold = 2

// runShared is the connection's loop with a shared maximum: acquire 1 of a
// shared name, one request at a time, and after sharedHold attempts
// release what it holds. Whatever it holds when the run stops stays held,
// for checkConsumption.
//
// What the run's connections hold of a name is counted from the arrival of
// a grant until just before its release is sent. Every unit counted when a
// grant arrives was granted before and released after that moment, so a
// count above the maximum proves the servers granted too much, unless the
// server closed a connection that held some: it released them then, at a
// moment the client does not see (the server gives up a connection whose
// lease it lost, as designed). Such a connection's units stop counting
// when the client sees the close (those of a release the close cut off
// stopped when it was sent), and a count above the maximum while they may
// already have been released is not a problem (see settleOvers). They may
// have been released from when the connection's last answered request
// was sent: its answer may have waited in the socket, read only after the
// close, while other connections were granted what the server had freed.
func (c *counterConn) runShared(ctx context.Context) {
	r := c.r
	rd := wire.NewResponseReader(c.nc)
	mine := map[int]uint32{} // name index → units held
	var answered time.Time   // when the last request answered was sent
	// releasing is the release in flight: its units no longer count, but
	// the server may have freed them at a close before it saw the release.
	var releasing closedHolding
	var buf []byte
	call := func(op wire.Opcode, name string, build func(opaque uint32) []byte) (wire.Frame, bool) {
		c.opaque++
		e := expect{op: op, opaque: c.opaque, name: name, sent: time.Now()}
		buf = build(e.opaque)
		c.nc.SetDeadline(time.Now().Add(r.o.Timeout))
		_, err := c.nc.Write(buf)
		var f wire.Frame
		if err == nil {
			f, err = rd.Read()
		}
		switch {
		case closedByPeer(err):
			r.closedByServer(mine, releasing, answered)
			return f, false
		case err != nil:
			r.add(Problem{Kind: Broken, Subject: c.subject(&e), Want: "a response", Got: err.Error()})
			return f, false
		}
		answered = e.sent
		c.series[op].record(e.sent, time.Since(e.sent))
		r.done.Add(1)
		if f.Opcode != op || f.Opaque != e.opaque {
			r.add(Problem{Kind: OutOfStep, Subject: c.subject(&e), Want: fmt.Sprintf("opcode %s opaque %d", op, e.opaque), Got: fmt.Sprintf("opcode %s opaque %d", f.Opcode, f.Opaque)})
			return f, false
		}
		return f, true
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return
		}
		if r.budget.Add(-1) < 0 {
			r.spent.Store(true)
			return
		}
		i := (attempt*r.o.Conns + c.id) % len(r.names)
		name := r.names[i]
		f, ok := call(wire.OpAcquire, name, func(opaque uint32) []byte {
			return wire.AppendAcquire(buf[:0], opaque, name, 1, r.o.Maximum)
		})
		if !ok {
			return
		}
		e := expect{op: wire.OpAcquire, opaque: c.opaque, name: name}
		switch {
		case f.Status == wire.StatusOK:
			// Read before the count: a closed connection's units counted
			// here were stopped after this time (see closedByServer).
			at := time.Now()
			if now := r.held[i].Add(1); now > int64(r.o.Maximum) {
				r.over(i, now, at, c.subject(&e))
			}
			mine[i]++
		case f.Status != wire.StatusNotAvailable:
			r.add(Problem{Kind: WrongStatus, Subject: c.subject(&e), Want: "OK or 0x21", Got: fmt.Sprintf("%#02x %q", byte(f.Status), f.Body)})
		}
		if attempt%sharedHold != sharedHold-1 {
			continue
		}
		for j, n := range mine {
			if r.budget.Add(-1) < 0 {
				r.spent.Store(true)
				return
			}
			r.held[j].Add(-int64(n))
			releasing = closedHolding{name: j, units: n, at: time.Now()}
			delete(mine, j)
			name := r.names[j]
			f, ok := call(wire.OpRelease, name, func(opaque uint32) []byte {
				return wire.AppendRelease(buf[:0], opaque, name, n)
			})
			releasing = closedHolding{}
			if !ok {
				return
			}
			if f.Status != wire.StatusOK {
				e := expect{op: wire.OpRelease, opaque: c.opaque, name: name}
				r.add(Problem{Kind: WrongStatus, Subject: c.subject(&e), Want: "OK", Got: fmt.Sprintf("%#02x %q", byte(f.Status), f.Body)})
			}
		}
	}
}

// checkConsumption asks every server, on a connection of its own, for the
// consumption of every shared name, which must be what the run's
// connections (all still open) hold.
func (r *countersRun) checkConsumption(ctx context.Context, addrs []string) {
	for _, addr := range addrs {
		d := net.Dialer{Timeout: r.o.Timeout}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			r.add(Problem{Kind: Broken, Subject: "final get on " + addr, Want: "a connection", Got: err.Error()})
			continue
		}
		nc.SetDeadline(time.Now().Add(r.o.Timeout + time.Duration(len(r.names))*time.Millisecond))
		var req []byte
		for i, name := range r.names {
			req = wire.AppendGet(req, uint32(i), name)
		}
		rd := wire.NewResponseReader(nc)
		_, err = nc.Write(req)
		for i := 0; err == nil && i < len(r.names); i++ {
			var f wire.Frame
			if f, err = rd.Read(); err != nil {
				break
			}
			want := r.held[i].Load()
			got := int64(-1)
			if f.Status == wire.StatusOK {
				v, perr := wire.ParseUint32(f.Body)
				if perr == nil {
					got = int64(v)
				}
			} else if f.Status == wire.StatusNotFound {
				got = 0
			}
			if got != want {
				r.add(Problem{Kind: WrongConsumption, Subject: fmt.Sprintf("get %q on %s", r.names[i], addr),
					Want: fmt.Sprintf("%d, what the run's connections hold", want), Got: fmt.Sprintf("status %#02x, %d", byte(f.Status), got)})
			}
		}
		if err != nil {
			r.add(Problem{Kind: Broken, Subject: "final get on " + addr, Want: "answers", Got: err.Error()})
		}
		nc.Close()
	}
}

// closedByPeer reports whether err says the other end closed the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// A closedHolding is what one connection the server closed held of one
// name, and when it may have been released: after the connection's last
// answered request was sent (since); it stopped counting before at.
type closedHolding struct {
	name      int
	units     uint32
	since, at time.Time
}

// An overCount is a count above the maximum, kept until the end of the
// run: a connection closed by the server later may explain it. at was read
// after the grant's answer and before the count.
type overCount struct {
	name    int
	held    int64
	at      time.Time
	subject string
}

// maxOvers bounds the counts above the maximum kept for settleOvers;
// further ones are problems at once.
const maxOvers = 100_000

// closedByServer stops counting mine, the units of a connection the
// server closed, and records them for the report and settleOvers, with
// those of a release in flight (releasing, if it has units), which
// stopped counting when it was sent. since is when the connection's last
// answered request was sent.
func (r *countersRun) closedByServer(mine map[int]uint32, releasing closedHolding, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closedConns++
	if releasing.units > 0 {
		releasing.since = since
		r.closedUnits += int64(releasing.units)
		r.closed = append(r.closed, releasing)
	}
	for i, n := range mine {
		r.held[i].Add(-int64(n))
		// Read after the count changed: a count that still held these
		// units was read before it (see over).
		at := time.Now()
		r.closedUnits += int64(n)
		r.closed = append(r.closed, closedHolding{name: i, units: n, since: since, at: at})
		delete(mine, i)
	}
}

// over records held units of name i after a grant, above the maximum; at
// was read after the grant's answer, before the count.
func (r *countersRun) over(i int, held int64, at time.Time, subject string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.overs) < maxOvers {
		r.overs = append(r.overs, overCount{name: i, held: held, at: at, subject: subject})
		return
	}
	r.check.add(r.overProblem(held, subject))
}

// settleOvers turns the counts above the maximum into problems, once the
// run's connections are done, leaving out the units of connections the
// server closed that may have been released by then: a count is a
// problem only if it stays above the maximum without them.
func (r *countersRun) settleOvers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.overs {
		held := o.held
		for _, c := range r.closed {
			if c.name == o.name && !o.at.Before(c.since) && o.at.Before(c.at) {
				held -= int64(c.units)
			}
		}
		if held > int64(r.o.Maximum) {
			r.check.add(r.overProblem(o.held, o.subject))
		} else {
			r.excused++
		}
	}
	r.overs = nil
}

func (r *countersRun) overProblem(held int64, subject string) Problem {
	return Problem{Kind: OverMaximum, Subject: subject, Want: fmt.Sprintf("at most %d held", r.o.Maximum), Got: fmt.Sprintf("%d held after this grant", held)}
}
