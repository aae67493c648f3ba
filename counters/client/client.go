package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// A Client talks to a counter server over one connection. Its methods are
// safe for concurrent use; calls are serialised. Resources acquired through
// a Client are held until they are released or the Client is closed.
//
// A failed call returns a *wire.StatusError when the server answered with an
// error status (test it with errors.Is(err, wire.StatusNotFound)); any other
// error means the connection is unusable, and every later call returns it.
type Client struct {
	nc     net.Conn
	opaque atomic.Uint32

	mu sync.Mutex
	// r, buf and err are guarded by mu.
	r   *wire.Reader
	buf []byte
	// err is set once the stream can no longer be trusted.
	err error
}

// Dial connects to the counter server at addr (host:port).
func Dial(ctx context.Context, addr string) (*Client, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("counters: %w", err)
	}
	return c, nil
}

// dial is Dial without the "counters:" prefix on the dialler's error, for
// RingClient, which names the package and the address itself.
func dial(ctx context.Context, addr string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewClient(nc), nil
}

// NewClient returns a Client that talks over nc and owns it.
func NewClient(nc net.Conn) *Client {
	return &Client{nc: nc, r: wire.NewResponseReader(nc)}
}

// Close closes the connection; the server then releases everything it
// acquired.
func (c *Client) Close() error { return c.nc.Close() }

// Hold blocks while the connection stays open and idle, holding what it
// acquired, until ctx ends (it then returns nil, the connection still
// open) or the connection is lost (it returns why, e.g. the server closed
// it; the Client is then unusable). Only ctx bounds it: the deadlines of
// earlier calls do not. No other call may be made meanwhile.
func (c *Client) Hold(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	// Every exchange clears its deadline when it ends; clear it here too,
	// so that no deadline but ctx's can end the hold.
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return c.fail(err)
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		close(interrupted)
	})
	var b [1]byte
	_, err := c.nc.Read(b[:])
	if !stop() { // ctx ended and may have cut the read short
		<-interrupted // its deadline is set: clear it for the next call
		c.nc.SetReadDeadline(time.Time{})
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
	}
	if err == nil {
		err = errors.New("the server sent data no request asked for")
	} else if errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection")
	}
	return c.fail(err)
}

// broken reports whether the connection is unusable: a call failed in a
// way that leaves the stream out of step (or the connection lost). A call
// refused before anything was sent (invalid arguments, a context already
// ended) does not break it.
func (c *Client) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// nextOpaque returns a fresh opaque value for a request.
func (c *Client) nextOpaque() uint32 { return c.opaque.Add(1) }

// exchange writes req (holding whole requests) and calls read, which reads
// their responses, with ctx's deadline and cancellation applied to the
// connection. The caller holds c.mu.
func (c *Client) exchange(ctx context.Context, req []byte, read func() error) error {
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	if err := c.nc.SetDeadline(deadline); err != nil {
		return c.fail(err)
	}
	var stop func() bool
	interrupted := make(chan struct{})
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			c.nc.SetDeadline(time.Unix(1, 0))
			close(interrupted)
		})
	}
	defer func() {
		if stop != nil && !stop() {
			// Let a cancellation that raced with the end of this call
			// set its deadline now, not in the middle of the next call.
			<-interrupted
		}
		// No deadline outlives the call: Hold, which reads with none,
		// must not inherit this one's.
		c.nc.SetDeadline(time.Time{})
	}()
	if _, err := c.nc.Write(req); err != nil {
		return c.fail(c.ctxErr(ctx, err))
	}
	if err := read(); err != nil {
		var se *wire.StatusError
		if errors.As(err, &se) {
			return err
		}
		return c.fail(c.ctxErr(ctx, err))
	}
	return nil
}

// ctxErr prefers the context's error to the I/O error it caused. The
// connection deadline can fire a moment before the context notices its own.
func (c *Client) ctxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(d) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// fail marks the connection unusable with err.
func (c *Client) fail(err error) error {
	c.err = fmt.Errorf("counters: connection unusable: %w", err)
	return c.err
}

// readResponse reads the response to the request op with opaque, returning
// a *wire.StatusError for an error status. Its body is valid until the next
// read.
func (c *Client) readResponse(op wire.Opcode, opaque uint32) (wire.Frame, error) {
	f, err := c.r.Read()
	if err != nil {
		return f, err
	}
	if f.Opcode != op || f.Opaque != opaque {
		return f, fmt.Errorf("%w: response opcode %s opaque %d, want %s opaque %d",
			errOutOfStep, f.Opcode, f.Opaque, op, opaque)
	}
	if f.Status != wire.StatusOK {
		return f, &wire.StatusError{Opcode: op, Status: f.Status, Message: string(f.Body)}
	}
	return f, nil
}

// errOutOfStep is a response that does not answer the request expected.
var errOutOfStep = errors.New("response out of step")

// call sends the one request built by build and reads its single response,
// passing its body to parse when the status is OK.
func (c *Client) call(ctx context.Context, op wire.Opcode, build func(dst []byte, opaque uint32) []byte, parse func(body []byte) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	opaque := c.nextOpaque()
	c.buf = build(c.buf[:0], opaque)
	return c.exchange(ctx, c.buf, func() error {
		f, err := c.readResponse(op, opaque)
		if err != nil || parse == nil {
			return err
		}
		return parse(f.Body)
	})
}

// Noop sends a Noop and waits for its answer.
func (c *Client) Noop(ctx context.Context) error {
	return c.call(ctx, wire.OpNoop, wire.AppendNoop, nil)
}

// Get returns the current consumption of the named counter.
func (c *Client) Get(ctx context.Context, name string) (uint32, error) {
	if err := wire.CheckName(name); err != nil {
		return 0, fmt.Errorf("counters: get: %w", err)
	}
	var v uint32
	err := c.call(ctx, wire.OpGet,
		func(dst []byte, opaque uint32) []byte { return wire.AppendGet(dst, opaque, name) },
		func(body []byte) (err error) { v, err = wire.ParseUint32(body); return err })
	return v, err
}

// Acquire acquires resources of the named counter, creating it, if its
// consumption stays within maximum, and returns the resources acquired.
// The arguments are checked before anything is sent: resources must be at
// least 1 and at most maximum.
func (c *Client) Acquire(ctx context.Context, name string, resources, maximum uint32) (uint32, error) {
	if err := CheckAcquire(name, resources, maximum); err != nil {
		return 0, fmt.Errorf("counters: acquire: %w", err)
	}
	var v uint32
	err := c.call(ctx, wire.OpAcquire,
		func(dst []byte, opaque uint32) []byte {
			return wire.AppendAcquire(dst, opaque, name, resources, maximum)
		},
		func(body []byte) (err error) { v, err = wire.ParseUint32(body); return err })
	return v, err
}

// CheckAcquire returns the error Acquire gives, before sending anything,
// for these arguments, or nil. A tool running several requests checks them
// all first, so that a bad one changes nothing.
func CheckAcquire(name string, resources, maximum uint32) error {
	switch {
	case resources == 0:
		return fmt.Errorf("%w: resources is 0", wire.ErrInvalid)
	case maximum < resources:
		return fmt.Errorf("%w: maximum %d is less than resources %d", wire.ErrInvalid, maximum, resources)
	}
	return wire.CheckName(name)
}

// Release gives back resources of the named counter that this Client
// acquired. Releasing 0 is allowed.
func (c *Client) Release(ctx context.Context, name string, resources uint32) error {
	if err := wire.CheckName(name); err != nil {
		return fmt.Errorf("counters: release: %w", err)
	}
	return c.call(ctx, wire.OpRelease,
		func(dst []byte, opaque uint32) []byte { return wire.AppendRelease(dst, opaque, name, resources) },
		nil)
}

// Stats returns the server's statistics, in the server's order.
func (c *Client) Stats(ctx context.Context) ([]wire.Stat, error) {
	var stats []wire.Stat
	err := c.call(ctx, wire.OpStats, wire.AppendStats,
		func(body []byte) (err error) { stats, err = wire.ParseStats(body); return err })
	return stats, err
}

// Hit adds one to the named access counter and returns its new total.
func (c *Client) Hit(ctx context.Context, name string) (int64, error) {
	if err := wire.CheckKindName(name); err != nil {
		return 0, fmt.Errorf("counters: hit: %w", err)
	}
	var v int64
	err := c.call(ctx, wire.OpHit,
		func(dst []byte, opaque uint32) []byte { return wire.AppendHit(dst, opaque, name) },
		func(body []byte) (err error) { v, err = parseTotal(body); return err })
	return v, err
}

// Add adds delta (1 to wire.MaxDelta) to the named access counter and
// returns its new total, as delta Hits would, in one request.
func (c *Client) Add(ctx context.Context, name string, delta int64) (int64, error) {
	if err := wire.CheckKindName(name); err != nil {
		return 0, fmt.Errorf("counters: add: %w", err)
	}
	if delta < 1 {
		return 0, fmt.Errorf("counters: add: %w: delta %d, want at least 1", wire.ErrInvalid, delta)
	}
	var v int64
	err := c.call(ctx, wire.OpAdd,
		func(dst []byte, opaque uint32) []byte { return wire.AppendAdd(dst, opaque, name, uint64(delta)) },
		func(body []byte) (err error) { v, err = parseTotal(body); return err })
	return v, err
}

// Total returns the total of the named access counter; a counter never hit
// gives wire.StatusNotFound.
func (c *Client) Total(ctx context.Context, name string) (int64, error) {
	if err := wire.CheckKindName(name); err != nil {
		return 0, fmt.Errorf("counters: total: %w", err)
	}
	var v int64
	err := c.call(ctx, wire.OpTotal,
		func(dst []byte, opaque uint32) []byte { return wire.AppendTotal(dst, opaque, name) },
		func(body []byte) (err error) { v, err = parseTotal(body); return err })
	return v, err
}

// parseTotal decodes a total, which the stores keep within int64.
func parseTotal(body []byte) (int64, error) {
	v, err := wire.ParseUint64(body)
	if err == nil && v > math.MaxInt64 {
		err = fmt.Errorf("%w: total %d beyond int64", wire.ErrMalformed, v)
	}
	return int64(v), err
}

// Visit records key as seen now under the named participant counter and
// returns the number of keys active within timeout and whether key was not
// active before. The timeout travels in whole seconds (a fraction is
// dropped); 0 means the server's default (300 s for the stores of package
// participant).
func (c *Client) Visit(ctx context.Context, name, key string, timeout time.Duration) (active int, isNew bool, err error) {
	secs, err := checkVisit(name, key, timeout)
	if err != nil {
		return 0, false, fmt.Errorf("counters: visit: %w", err)
	}
	err = c.call(ctx, wire.OpVisit,
		func(dst []byte, opaque uint32) []byte { return wire.AppendVisit(dst, opaque, secs, name, key) },
		func(body []byte) error {
			n, flag, err := wire.ParseUint32Flag(body)
			active, isNew = int(n), flag
			return err
		})
	return active, isNew, err
}

// Leave forgets key under the named participant counter and returns the
// number of keys left and whether key was there.
func (c *Client) Leave(ctx context.Context, name, key string) (active int, removed bool, err error) {
	if err := checkLeave(name, key); err != nil {
		return 0, false, fmt.Errorf("counters: leave: %w", err)
	}
	err = c.call(ctx, wire.OpLeave,
		func(dst []byte, opaque uint32) []byte { return wire.AppendLeave(dst, opaque, name, key) },
		func(body []byte) error {
			n, flag, err := wire.ParseUint32Flag(body)
			active, removed = int(n), flag
			return err
		})
	return active, removed, err
}

// Active returns the number of keys of the named participant counter seen
// within timeout (whole seconds, 0 for the server's default).
func (c *Client) Active(ctx context.Context, name string, timeout time.Duration) (int, error) {
	if err := wire.CheckKindName(name); err != nil {
		return 0, fmt.Errorf("counters: active: %w", err)
	}
	secs, err := timeoutSeconds(timeout)
	if err != nil {
		return 0, fmt.Errorf("counters: active: %w", err)
	}
	var v uint32
	err = c.call(ctx, wire.OpActive,
		func(dst []byte, opaque uint32) []byte { return wire.AppendActive(dst, opaque, secs, name) },
		func(body []byte) (err error) { v, err = wire.ParseUint32(body); return err })
	return int(v), err
}

func checkLeave(name, key string) error {
	if err := wire.CheckKindName(name); err != nil {
		return err
	}
	return wire.CheckKey(key)
}

func checkVisit(name, key string, timeout time.Duration) (uint32, error) {
	if err := checkLeave(name, key); err != nil {
		return 0, err
	}
	return timeoutSeconds(timeout)
}

// CheckTimeout returns the error Visit and Active give, before sending
// anything, for this participant timeout, or nil.
func CheckTimeout(timeout time.Duration) error {
	_, err := timeoutSeconds(timeout)
	return err
}

// timeoutSeconds converts a participant timeout to its 4-byte field: 0
// (the default) or 1 s to wire.MaxTimeout.
func timeoutSeconds(timeout time.Duration) (uint32, error) {
	if timeout != 0 && (timeout < time.Second || timeout > wire.MaxTimeout) {
		return 0, fmt.Errorf("%w: timeout %v, want 0 (default) or 1s to %v", wire.ErrInvalid, timeout, wire.MaxTimeout)
	}
	return uint32(timeout / time.Second), nil
}

// Dump calls fn for every counter on the server, in the server's order. If
// fn returns an error, the rest of the dump is read and skipped, and Dump
// returns that error.
func (c *Client) Dump(ctx context.Context, fn func(wire.DumpEntry) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	opaque := c.nextOpaque()
	c.buf = wire.AppendDump(c.buf[:0], opaque)
	var fnErr error
	err := c.exchange(ctx, c.buf, func() error {
		for {
			f, err := c.readResponse(wire.OpDump, opaque)
			if err != nil {
				return err
			}
			if len(f.Body) == 0 {
				return nil
			}
			e, err := wire.ParseDumpEntry(f.Body)
			if err != nil {
				return err
			}
			if fnErr == nil {
				fnErr = fn(e)
			}
		}
	})
	if err != nil {
		return err
	}
	return fnErr
}
