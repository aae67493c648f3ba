package counters

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// A conn is one client connection, served by one goroutine that reads
// requests and answers them in order.
type conn struct {
	s      *Server
	nc     net.Conn
	r      *wire.Reader
	w      *bufio.Writer
	holder ResourceHolder
	batch  resourceBatch // the buffers of resources
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc}
	// A holder whose holdings the store can no longer vouch for ends its
	// connection: that is how a client learns its holdings are gone.
	c.holder = s.res.NewHolder(func() {
		s.log.Warn().Stringer("remote", nc.RemoteAddr()).Msg("resource holdings lost: closing the connection")
		nc.Close()
	})
	c.r = wire.NewRequestReader(connReader{c})
	c.w = bufio.NewWriterSize(connWriter{c}, writeBufferSize)
	return c
}

// connReader reads from the network for c.r. The read buffer only goes to
// the network when it has no whole request left, and a read may block, so
// the responses produced so far are flushed first: pipelined requests get
// their answers in one write, and a client waiting for an answer before
// sending more never waits forever.
type connReader struct{ c *conn }

func (r connReader) Read(p []byte) (int, error) {
	c := r.c
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	if d := c.s.opts.IdleTimeout; d > 0 {
		if err := c.nc.SetReadDeadline(time.Now().Add(d)); err != nil {
			return 0, err
		}
	}
	return c.nc.Read(p)
}

// connWriter writes to the network for c.w under the write deadline, so a
// client that stops reading is disconnected instead of stalling its
// goroutine forever.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	if err := w.c.nc.SetWriteDeadline(time.Now().Add(w.c.s.opts.WriteTimeout)); err != nil {
		return 0, err
	}
	return w.c.nc.Write(p)
}

// send queues a response. Write errors are sticky in bufio.Writer and end
// the connection at the next flush.
func (c *conn) send(b []byte) { c.w.Write(b) }

// buf returns an empty slice to append one response to.
func (c *conn) buf() []byte { return c.w.AvailableBuffer() }

// serve answers requests until the client closes, the connection fails or
// the client breaks the protocol; then it releases everything the
// connection held.
func (c *conn) serve() {
	defer c.s.forget(c)
	defer c.releaseAll()
	defer c.nc.Close()
	log := c.s.log.With().Stringer("remote", c.nc.RemoteAddr()).Logger()

	for {
		f, err := c.r.Read()
		if err != nil {
			var pe *wire.ProtocolError
			if errors.As(err, &pe) {
				// The framing can no longer be trusted: answer and close.
				c.observe(pe.Header.Opcode, wire.StatusInvalid)
				c.send(wire.AppendError(c.buf(), pe.Header.Opcode, wire.StatusInvalid, pe.Header.Opaque))
				c.w.Flush()
				c.s.protocolLog.Info().Stringer("remote", c.nc.RemoteAddr()).Err(err).Msg("counter client broke the protocol")
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				log.Debug().Err(err).Msg("counter connection ended")
			}
			return
		}
		if batchable(f.Opcode) {
			c.resources(f)
			continue
		}
		if err := c.dispatch(f); err != nil {
			log.Debug().Err(err).Stringer("op", f.Opcode).Msg("counter connection failed")
			return
		}
	}
}

// releaseAll gives back everything the connection held. It does not use
// the server's context, which Close cancels: a shutdown must release too.
func (c *conn) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.stores.Timeout)
	defer cancel()
	c.holder.ReleaseAll(ctx)
}

// dispatch runs one request and queues its answer. It returns an error only
// when the connection must end.
func (c *conn) dispatch(f wire.Frame) error {
	h := handlers[f.Opcode]
	err := errUnknownCommand
	if h != nil {
		err = h(c, f)
	}
	return c.finish(f, err)
}

// finish accounts for a request that ended with err (nil: its answer is
// queued) and queues its error answer. It returns err when the connection
// must end.
func (c *conn) finish(f wire.Frame, err error) error {
	if err == nil {
		c.s.commands[f.Opcode].Add(1)
		c.observe(f.Opcode, wire.StatusOK)
		return nil
	}
	st, ok := StatusOf(err)
	if !ok {
		return err
	}
	switch st {
	case wire.StatusStoreFailure:
		c.s.storeFailLog.Error().Err(err).Stringer("op", f.Opcode).Msg("counter store failed")
	case wire.StatusInternalError:
		c.s.storeFailLog.Error().Err(err).Stringer("op", f.Opcode).Msg("counter store is damaged")
	}
	if st != wire.StatusInvalid && st != wire.StatusUnknownCommand {
		c.s.commands[f.Opcode].Add(1)
	}
	c.observe(f.Opcode, st)
	c.send(wire.AppendError(c.buf(), f.Opcode, st, f.Opaque))
	return nil
}

func (c *conn) observe(op wire.Opcode, st wire.Status) {
	if o := c.s.opts.Observer; o != nil {
		o.OnRequest(op, st)
	}
}
