package counters_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// testTimeout bounds every blocking step of a test.
const testTimeout = 10 * time.Second

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct{ sec atomic.Int64 }

func newFakeClock(sec int64) *fakeClock {
	c := &fakeClock{}
	c.sec.Store(sec)
	return c
}

func (c *fakeClock) Now() time.Time { return time.Unix(c.sec.Load(), 0) }
func (c *fakeClock) Set(sec int64)  { c.sec.Store(sec) }

// newServer returns a server closed at the end of the test.
func newServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	return counterstest.NewServer(t, opts)
}

// listen serves s on a loopback port and returns its address.
func listen(t testing.TB, s *counters.Server) string { return counterstest.Listen(t, s) }

// pipe serves one end of a net.Pipe on s and returns the other, with a
// deadline so a test never hangs.
func pipe(t testing.TB, s *counters.Server) net.Conn {
	t.Helper()
	c1, c2 := net.Pipe()
	s.ServeConn(c2)
	c1.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { c1.Close() })
	return c1
}

// dial returns a raw TCP connection to addr with a deadline.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// client returns a Client connected to addr.
func client(t testing.TB, addr string) *counters.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := counters.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctx returns a context that ends with the test or after testTimeout.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// unhex decodes a fixture written as hex with spaces for readability.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad fixture %q: %v", s, err)
	}
	return b
}

// exchange writes req in the background (a net.Pipe write blocks until the
// server reads it, and the server may be waiting to write) and reads
// exactly n bytes of answer.
func exchange(t testing.TB, c net.Conn, req []byte, n int) []byte {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(req)
		werr <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %d bytes: %v (got % x)", n, err, got)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	return got
}

// expectClosed asserts that the server closed c: a read ends without data.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v: connection still open", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed: %v", err)
	}
}

// statsMap returns s's statistics by name.
func statsMap(s *counters.Server) map[string]string {
	m := make(map[string]string)
	for _, st := range s.Stats() {
		m[st.Name] = st.Value
	}
	return m
}

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond) // polling interval, not ordering
	}
}

// equalBytes fails the test unless got equals the fixture want.
func equalBytes(t testing.TB, what string, got []byte, want string) {
	t.Helper()
	if w := unhex(t, want); !bytes.Equal(got, w) {
		t.Fatalf("%s:\ngot  % x\nwant % x", what, got, w)
	}
}

// dumpAll returns the server's counters sorted by name.
func dumpAll(t testing.TB, c *counters.Client) []wire.DumpEntry {
	t.Helper()
	var es []wire.DumpEntry
	if err := c.Dump(ctx(t), func(e wire.DumpEntry) error { es = append(es, e); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}

// redisAccess returns an access counter store on rdb under prefix.
func redisAccess(tb testing.TB, rdb redis.UniversalClient, prefix string) *access.Redis {
	tb.Helper()
	s, err := access.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// redisParticipants returns a participant counter store on rdb under
// prefix.
func redisParticipants(tb testing.TB, rdb redis.UniversalClient, prefix string) *participant.Redis {
	tb.Helper()
	s, err := participant.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
