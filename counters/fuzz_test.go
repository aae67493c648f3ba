package counters

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// fuzzConn is a net.Conn whose reads come from a fixed input and whose
// writes are recorded; Close signals done.
type fuzzConn struct {
	in   *bytes.Reader
	out  bytes.Buffer
	done chan struct{}
	once sync.Once
}

func (c *fuzzConn) Read(p []byte) (int, error)       { return c.in.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *fuzzConn) Close() error                     { c.once.Do(func() { close(c.done) }); return nil }
func (c *fuzzConn) LocalAddr() net.Addr              { return fuzzAddr{} }
func (c *fuzzConn) RemoteAddr() net.Addr             { return fuzzAddr{} }
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

type fuzzAddr struct{}

func (fuzzAddr) Network() string { return "fuzz" }
func (fuzzAddr) String() string  { return "fuzz" }

// FuzzConn runs a whole connection on arbitrary input. Every request up to
// the first protocol error gets its answer(s) in order, the output is a
// valid response stream, and once the connection ends every counter is
// back at 0 because everything acquired was released.
func FuzzConn(f *testing.F) {
	var session []byte
	session = wire.AppendAcquire(session, 1, "a", 2, 5)
	session = wire.AppendAcquire(session, 2, "b", 1, 1)
	session = wire.AppendGet(session, 3, "a")
	session = wire.AppendRelease(session, 4, "a", 1)
	session = wire.AppendRelease(session, 5, "a", 7)
	session = wire.AppendDump(session, 6)
	session = wire.AppendStats(session, 7)
	session = wire.AppendNoop(session, 8)
	session = wire.AppendHit(session, 9, "h")
	session = wire.AppendTotal(session, 10, "h")
	session = wire.AppendVisit(session, 11, 0, "p", "k")
	session = wire.AppendActive(session, 12, 60, "p")
	session = wire.AppendLeave(session, 13, "p", "k")
	f.Add(session)
	f.Add(wire.AppendVisit(nil, 1, 0, "p", ""))
	f.Add(append(wire.AppendAcquire(nil, 1, "x", 1, 1), 0x80, 1, 2, 3))
	f.Add(wire.AppendAcquire(nil, 1, "x", 0xffffffff, 0xffffffff))
	f.Add([]byte{0x90, 0x42, 0, 0, 0, 0, 0, 3, 0, 0, 0, 9, 1, 2, 3})
	f.Add([]byte{0x90, 0x01, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 9})
	f.Add(session[:len(session)-5])

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewServer(ServerOptions{Stores: MemoryStores(nil), MaxMemory: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := &fuzzConn{in: bytes.NewReader(data), done: make(chan struct{})}
		s.ServeConn(c)
		<-c.done
		// The connection is closed before its holdings are released:
		// Close waits for both.
		s.Close()

		want := expectedAnswers(data)
		r := wire.NewResponseReader(bytes.NewReader(c.out.Bytes()))
		for i := 0; ; {
			fr, err := r.Read()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("%d answers, want %d", i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			if i >= len(want) {
				t.Fatalf("extra answer %+v", fr.Header)
			}
			if fr.Opcode != want[i].Opcode || fr.Opaque != want[i].Opaque {
				t.Fatalf("answer %d is %+v, want one to %+v", i, fr.Header, want[i])
			}
			if fr.Opcode == wire.OpDump && fr.Status == wire.StatusOK && len(fr.Body) > 0 {
				continue // a dump entry; the empty answer ends the dump
			}
			i++
		}
		err = s.table.Dump(func(e resource.Entry) error {
			if e.Consumption != 0 {
				return errors.New(e.Name)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("counter %q still held after the connection ended", err)
		}
	})
}

// expectedAnswers returns the headers of the requests in data that must be
// answered: all of them up to and including the first protocol error.
func expectedAnswers(data []byte) []wire.Header {
	var hs []wire.Header
	r := wire.NewRequestReader(bytes.NewReader(data))
	for {
		f, err := r.Read()
		var pe *wire.ProtocolError
		switch {
		case errors.As(err, &pe):
			return append(hs, pe.Header)
		case err != nil:
			return hs
		}
		hs = append(hs, f.Header)
	}
}
