// Package counterstest serves a real counter server on a loopback port for
// tests, in the manner of net/http/httptest.
package counterstest

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// NewServer returns a server with opts, closed at the end of the test.
func NewServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	t.Helper()
	s, err := counters.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Listen serves s on 127.0.0.1:0 and returns its address. At the end of the
// test s is closed and Serve must have returned ErrServerClosed.
func Listen(t testing.TB, s *counters.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, counters.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// Start is NewServer then Listen: a server with opts on a loopback port.
func Start(t testing.TB, opts counters.ServerOptions) string {
	t.Helper()
	return Listen(t, NewServer(t, opts))
}

// StartRedis starts a server whose resource counters live in Redis through
// rdb (a client that never retries) under prefix, with the given lease (0
// for the default) and the default statistics interval, and returns its
// address. Servers started with the same Redis and prefix share their
// counters. The prefix must be the test's own, since the store grants at
// once (resource.RedisOptions.AssumeNoHolders). The server closes before
// its store at the end of the test.
func StartRedis(t testing.TB, rdb redis.UniversalClient, prefix string, lease time.Duration) string {
	t.Helper()
	r, err := resource.NewRedis(context.Background(), rdb, resource.RedisOptions{Prefix: prefix, Lease: lease, AssumeNoHolders: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// Registered after the store's cleanup, so the server closes first,
	// releasing its connections' holdings.
	stores := counters.MemoryStores(nil)
	stores.Timeout = 10 * time.Second
	return Start(t, counters.ServerOptions{Resources: counters.RedisResources(r), Stores: stores})
}

// Timeout bounds every blocking step of the helpers below.
const Timeout = 10 * time.Second

// Context returns a context that ends with the test or after Timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Dial returns a client connected to addr, closed at the end of the test.
func Dial(t testing.TB, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Stats returns s's statistics by name.
func Stats(s *counters.Server) map[string]string {
	m := make(map[string]string)
	for _, st := range s.Stats() {
		m[st.Name] = st.Value
	}
	return m
}

// Dump returns the counters of c's server sorted by name.
func Dump(t testing.TB, c *client.Client) []wire.DumpEntry {
	t.Helper()
	var es []wire.DumpEntry
	if err := c.Dump(Context(t), func(e wire.DumpEntry) error { es = append(es, e); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}

// Pipe serves one end of a net.Pipe on s and returns the other, with a
// deadline of Timeout so a test never hangs.
func Pipe(t testing.TB, s *counters.Server) net.Conn {
	t.Helper()
	c1, c2 := net.Pipe()
	s.ServeConn(c2)
	c1.SetDeadline(time.Now().Add(Timeout))
	t.Cleanup(func() { c1.Close() })
	return c1
}

// Exchange writes req in the background (a net.Pipe write blocks until the
// server reads it, and the server may be waiting to write) and reads
// exactly n bytes of answer.
func Exchange(t testing.TB, c net.Conn, req []byte, n int) []byte {
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

// Unhex decodes a fixture written as hex with spaces for readability.
func Unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad fixture %q: %v", s, err)
	}
	return b
}

// EqualBytes fails the test unless got equals the fixture want (see Unhex).
func EqualBytes(t testing.TB, what string, got []byte, want string) {
	t.Helper()
	if w := Unhex(t, want); !bytes.Equal(got, w) {
		t.Fatalf("%s:\ngot  % x\nwant % x", what, got, w)
	}
}

// fakeStore is an access and participant store whose calls go to fn,
// which gets the call's context and its operation name.
type fakeStore struct {
	fn func(ctx context.Context, op string) error
}

func (f fakeStore) Hit(ctx context.Context, name string) (int64, error) {
	return 1, f.fn(ctx, "hit")
}

func (f fakeStore) Add(ctx context.Context, name string, n int64) (int64, error) {
	return n, f.fn(ctx, "add")
}

func (f fakeStore) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (int, int, error) {
	return len(keys), len(keys), f.fn(ctx, "visit")
}

func (f fakeStore) Total(ctx context.Context, name string) (int64, error) {
	return 1, f.fn(ctx, "total")
}

func (f fakeStore) Visit(ctx context.Context, name, key string, timeout time.Duration) (int, bool, error) {
	return 1, true, f.fn(ctx, "visit")
}

func (f fakeStore) Leave(ctx context.Context, name, key string) (int, bool, error) {
	return 0, true, f.fn(ctx, "leave")
}

func (f fakeStore) Active(ctx context.Context, name string, timeout time.Duration) (int, error) {
	return 1, f.fn(ctx, "active")
}

var (
	_ access.Store      = fakeStore{}
	_ participant.Store = fakeStore{}
)

// FakeStores returns memory stores whose access and participant counters
// are a fake whose calls go to fn, which gets the call's context and its
// operation name ("hit", "add", "visit", "total", "leave", "active"), and
// answers with fn's error: to make the stores fail or stall.
func FakeStores(fn func(ctx context.Context, op string) error) counters.Stores {
	f := fakeStore{fn: fn}
	stores := counters.MemoryStores(nil)
	stores.Access, stores.Participants = f, f
	return stores
}

// A Blocker's Call, given to FakeStores, waits until Release is closed or
// its context ends; it reports each call's start (its operation) on
// Started and its end on Ended.
type Blocker struct {
	Started chan string
	Ended   chan error
	Release chan struct{}
}

// NewBlocker returns a Blocker whose channels hold 10 reports each.
func NewBlocker() *Blocker {
	return &Blocker{Started: make(chan string, 10), Ended: make(chan error, 10), Release: make(chan struct{})}
}

// Call is the store call: see Blocker.
func (b *Blocker) Call(ctx context.Context, op string) error {
	b.Started <- op
	var err error
	select {
	case <-b.Release:
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.Ended <- err
	return err
}

// An HTTPCall is one request to the counters' HTTP API and what it must
// answer.
type HTTPCall struct {
	Method, Path, Body string
	Code               int
	// Want is the exact JSON answer, or for errors a substring of the
	// "error" field.
	Want string
}

// LoopbackRequest is httptest.NewRequest from a loopback client, which a
// handler without a token serves.
func LoopbackRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.RemoteAddr = "127.0.0.1:1234"
	return r
}

// Do runs c against h and checks the status, the content type and the body.
func (c HTTPCall) Do(t *testing.T, h http.Handler) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, LoopbackRequest(c.Method, c.Path, strings.NewReader(c.Body)))
	if rec.Code != c.Code {
		t.Fatalf("%s %s %s: status %d %s, want %d", c.Method, c.Path, c.Body, rec.Code, rec.Body, c.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", c.Method, c.Path, ct)
	}
	if c.Method == http.MethodHead {
		return rec // net/http's server drops the body; the recorder does not
	}
	if c.Code < 300 {
		if got := strings.TrimSpace(rec.Body.String()); got != c.Want {
			t.Fatalf("%s %s %s:\ngot  %s\nwant %s", c.Method, c.Path, c.Body, got, c.Want)
		}
		return rec
	}
	var e struct{ Error string }
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || !strings.Contains(e.Error, c.Want) {
		t.Fatalf("%s %s %s: error body %v (%v), want an error with %q", c.Method, c.Path, c.Body, e, err, c.Want)
	}
	return rec
}

// A Clock is a settable clock in whole seconds, safe for concurrent use:
// give its Now to the stores that read the time.
type Clock struct{ sec atomic.Int64 }

// NewClock returns a Clock at sec seconds after the epoch.
func NewClock(sec int64) *Clock {
	c := &Clock{}
	c.sec.Store(sec)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(c.sec.Load(), 0) }

// Set moves the clock to sec seconds after the epoch.
func (c *Clock) Set(sec int64) { c.sec.Store(sec) }

// HoldingLeft returns an error naming a resource holding left in the
// Redis store's keys under prefix (the service's base prefix), or nil
// when there is none. It reads the keys without running a script, which
// would drop the holdings whose lease has ended.
func HoldingLeft(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	keys, err := rdb.Keys(ctx, prefix+"r:*").Result()
	if err != nil {
		return err
	}
	for _, k := range keys {
		if typ, _ := rdb.Type(ctx, k).Result(); typ != "hash" {
			continue
		}
		fields, err := rdb.HKeys(ctx, k).Result()
		if err != nil {
			return err
		}
		for _, f := range fields {
			if strings.HasPrefix(f, "h:") {
				return fmt.Errorf("%s still holds %s", k, f)
			}
		}
	}
	return nil
}
