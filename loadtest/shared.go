package loadtest

import (
	"context"
	"fmt"
	"net"
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
// count above the maximum proves the servers granted too much.
func (c *counterConn) runShared(ctx context.Context) {
	r := c.r
	rd := wire.NewResponseReader(c.nc)
	mine := map[int]uint32{} // name index → units held
	var buf []byte
	call := func(op wire.Opcode, name string, build func(opaque uint32) []byte) (wire.Frame, bool) {
		c.opaque++
		e := expect{op: op, opaque: c.opaque, name: name, sent: time.Now()}
		buf = build(e.opaque)
		c.nc.SetDeadline(time.Now().Add(r.o.Timeout))
		if _, err := c.nc.Write(buf); err != nil {
			r.add(Problem{Kind: Broken, Subject: c.subject(&e), Want: "a response", Got: err.Error()})
			return wire.Frame{}, false
		}
		f, err := rd.Read()
		if err != nil {
			r.add(Problem{Kind: Broken, Subject: c.subject(&e), Want: "a response", Got: err.Error()})
			return f, false
		}
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
			if now := r.held[i].Add(1); now > int64(r.o.Maximum) {
				r.add(Problem{Kind: OverMaximum, Subject: c.subject(&e), Want: fmt.Sprintf("at most %d held", r.o.Maximum), Got: fmt.Sprintf("%d held after this grant", now)})
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
			delete(mine, j)
			name := r.names[j]
			f, ok := call(wire.OpRelease, name, func(opaque uint32) []byte {
				return wire.AppendRelease(buf[:0], opaque, name, n)
			})
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
