// Package counters serves the yrmcds counter protocol on a TCP port.
//
// Server hosts the resource counters (acquire/release, package resource) and
// speaks the protocol of package wire byte for byte, so existing yrmcds
// counter clients (libyrmcds, yc-cnt, package client) work unchanged. On the
// same port it answers the extension opcodes of the access counters (Hit,
// Total, Add, List; package access), participant counters (Visit, Leave,
// Active; package participant), window counters (WHit, WCount; package
// window) and unique counters (UAdd, UCount; package unique), whose stores
// it is given in Stores (OpenStores opens them by kind). StatusOf is the one
// table from the stores' errors to the protocol's statuses, which the HTTP
// API (package httpapi, serving the same Stores as JSON) maps on to HTTP
// ones.
//
// The port has no authentication: bind it to loopback or a private
// network.
//
// A server:
//
//	s, err := counters.NewServer(counters.ServerOptions{Stores: counters.MemoryStores(nil), Logger: log})
//	ln, err := net.Listen("tcp", ":11215")
//	go s.Serve(ln)
//	defer s.Close()
package counters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// Defaults of ServerOptions.
const (
	// DefaultMaxConnections is the service's ServerOptions.MaxConnections
	// unless told another (COUNTER_MAX_CONNECTIONS).
	DefaultMaxConnections = 10000
	// DefaultWriteTimeout is the default ServerOptions.WriteTimeout.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultStoreTimeout is the default Stores.Timeout.
	DefaultStoreTimeout = 2 * time.Second

	// StoreFailLogEvery spaces the "counter store failed" lines of the
	// server and of the HTTP API: while a store is down every request
	// fails.
	StoreFailLogEvery = 10 * time.Second

	// protocolLogEvery spaces the "counter client broke the protocol"
	// lines: a fuzzing or broken client can break it on every connection.
	protocolLogEvery = 10 * time.Second

	// maxAcceptBackoff bounds the pause after a failed Accept.
	maxAcceptBackoff = time.Second
	// writeBufferSize is the per-connection response buffer.
	writeBufferSize = 4096
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("counters: server closed")

// An Observer is told about requests and connections, for metrics. Its
// methods are called from many goroutines at once and must be fast.
type Observer interface {
	// OnRequest is called once per request with its final status
	// (StatusOK for a whole Dump).
	OnRequest(op wire.Opcode, st wire.Status)
	// OnConn is called with +1 when a connection is served and -1 when it
	// ends. Connections refused by MaxConnections are not reported.
	OnConn(delta int)
}

// Stores are the access, participant, window and unique counters that the
// extension opcodes and the HTTP API serve. Every store must be given:
// give the Server and the HTTP handler the same Stores to serve the same
// counters (MemoryStores keeps them all in this process).
type Stores struct {
	// Access holds the access counters (Hit, Total).
	Access access.Store
	// Participants holds the participant counters (Visit, Leave, Active).
	Participants participant.Store
	// Windows holds the window counters (WHit, WCount).
	Windows window.Store
	// Uniques holds the unique counters (UAdd, UCount).
	Uniques unique.Store
	// Timeout bounds each store call, so a slow store (Redis, a file
	// another process keeps locked) holds a request for at most that long;
	// the request then fails with wire.StatusStoreFailure (HTTP 503). Zero
	// means DefaultStoreTimeout.
	Timeout time.Duration
}

// MemoryStores returns Stores keeping every counter in this process's
// memory, each kind within the default memcap.Limits; the participant and
// window counters read the time from clock (nil: time.Now).
func MemoryStores(clock func() time.Time) Stores { return MemoryStoresWithin(clock, memcap.Limits{}) }

// MemoryStoresWithin is MemoryStores with each kind within lim (zero
// fields: the defaults).
func MemoryStoresWithin(clock func() time.Time, lim memcap.Limits) Stores {
	return Stores{
		Access:       access.NewMemory(lim),
		Participants: participant.NewMemory(clock, lim),
		Windows:      window.NewMemory(clock, lim),
		Uniques:      unique.NewMemory(lim),
	}
}

// WithDefaults returns s with its timeout defaulted, or an error if s is
// invalid: a negative timeout, or a store not given (a quiet default would
// give each consumer counters of its own).
func (s Stores) WithDefaults() (Stores, error) {
	if s.Timeout < 0 {
		return s, fmt.Errorf("counters: store timeout %v: must not be negative", s.Timeout)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultStoreTimeout
	}
	for _, f := range []struct {
		name string
		nil  bool
	}{{"Access", s.Access == nil}, {"Participants", s.Participants == nil}, {"Windows", s.Windows == nil}, {"Uniques", s.Uniques == nil}} {
		if f.nil {
			return s, fmt.Errorf("counters: no %s store given (MemoryStores keeps them in this process)", f.name)
		}
	}
	return s, nil
}

// ServerOptions configure a Server. Zero fields mean the documented
// defaults.
type ServerOptions struct {
	// MaxConnections is the most connections served at once; more are
	// closed as soon as they are accepted. Zero means no limit.
	MaxConnections int
	// Buckets is the expected number of counters (counter.buckets);
	// default resource.DefaultBuckets. See resource.Options.Buckets.
	Buckets int
	// StatsInterval is the epoch-aligned interval of the maximum
	// consumption and of GC: whole seconds, at least resource.MinInterval,
	// default resource.DefaultInterval.
	StatsInterval time.Duration
	// MaxMemory caps the estimated memory of the counters in bytes: an
	// Acquire that would create a counter past it is answered Out of
	// memory. Default resource.DefaultMaxMemory.
	MaxMemory int64
	// MaxHoldings is the most names one connection holds at once: an
	// Acquire of one more is answered Out of memory. Default
	// resource.DefaultMaxHoldings. See resource.Options.MaxHoldings.
	MaxHoldings int
	// WriteTimeout bounds each write to a client; a client that does not
	// read its responses for that long is disconnected, releasing what it
	// holds. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout disconnects a client that sends nothing for that long.
	// Zero means none, the default: holding a connection open is how a
	// client holds its resources.
	IdleTimeout time.Duration
	// Logger receives connection and protocol errors. The zero Logger
	// logs nothing.
	Logger zerolog.Logger
	// Clock tells the time for the statistics intervals (default
	// time.Now).
	Clock func() time.Time
	// Observer, when not nil, is told about every request and connection.
	Observer Observer
	// Stores hold the counters of the extension opcodes; each must be
	// given (see Stores).
	Stores Stores
	// Resources holds the resource counters. Nil means a table in this
	// process's memory, made with Buckets, StatsInterval, MaxMemory,
	// MaxHoldings and Clock and garbage-collected just after each interval
	// boundary; with a store of its own (RedisResources), those five
	// options are unused.
	Resources ResourceStore
}

// A Server serves the counter protocol. Its methods are safe for
// concurrent use.
type Server struct {
	opts ServerOptions
	log  zerolog.Logger
	// storeFailLog logs store failures, at most one line per
	// StoreFailLogEvery: while a store is down every request fails.
	storeFailLog *ratelog.Logger
	// protocolLog logs protocol breaks, at most one line per
	// protocolLogEvery.
	protocolLog *ratelog.Logger
	table       *resource.Table // nil unless the resources are in memory
	res         ResourceStore
	stores      Stores

	// ctx is cancelled by Close, ending store calls in flight.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// closed, listeners and conns are guarded by mu.
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}

	// done is closed by Close; wg counts the GC loop, Serve calls and
	// connection goroutines.
	done chan struct{}
	wg   sync.WaitGroup

	currConns  atomic.Int64
	totalConns atomic.Uint64
	rejected   atomic.Uint64
	commands   [256]atomic.Uint64
}

// NewServer returns a Server, or an error if opts is invalid. It runs GC
// once and starts the GC loop, which runs just after each interval
// boundary; Close stops it.
func NewServer(opts ServerOptions) (*Server, error) {
	switch {
	case opts.MaxConnections < 0:
		return nil, fmt.Errorf("counters: max connections %d: must not be negative", opts.MaxConnections)
	case opts.WriteTimeout < 0:
		return nil, fmt.Errorf("counters: write timeout %v: must not be negative", opts.WriteTimeout)
	case opts.IdleTimeout < 0:
		return nil, fmt.Errorf("counters: idle timeout %v: must not be negative", opts.IdleTimeout)
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	stores, err := opts.Stores.WithDefaults()
	if err != nil {
		return nil, err
	}
	var table *resource.Table
	res := opts.Resources
	if res == nil {
		table, err = resource.New(resource.Options{
			Buckets:     opts.Buckets,
			Interval:    opts.StatsInterval,
			MaxMemory:   opts.MaxMemory,
			MaxHoldings: opts.MaxHoldings,
			Clock:       opts.Clock,
		})
		if err != nil {
			return nil, fmt.Errorf("counters: %w", err)
		}
		res = memoryResources{table}
	}
	s := &Server{
		opts:         opts,
		log:          opts.Logger,
		storeFailLog: ratelog.New(opts.Logger, StoreFailLogEvery),
		protocolLog:  ratelog.New(opts.Logger, protocolLogEvery),
		table:        table,
		res:          res,
		stores:       stores,
		listeners:    make(map[net.Listener]struct{}),
		conns:        make(map[*conn]struct{}),
		done:         make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if table != nil {
		table.GC()
		s.wg.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// gcLoop runs GC just after each interval boundary until Close.
func (s *Server) gcLoop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.opts.Clock()
		timer.Reset(s.table.NextBoundary(now).Sub(now))
		select {
		case <-s.done:
			return
		case <-timer.C:
		}
		n := s.table.GC()
		s.log.Debug().Int("deleted", n).Msg("counter gc")
	}
}

// Serve accepts connections on ln and serves each in its own goroutine
// until Close, then returns ErrServerClosed. Serve closes ln. Other accept
// errors are retried after a pause, except a closed listener, which is
// returned.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("counters: accept: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
			s.log.Error().Err(err).Stringer("retry_in", backoff).Msg("counter port accept failed")
			select {
			case <-s.done:
				return ErrServerClosed
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		s.ServeConn(nc)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ServeConn serves nc in a new goroutine and returns at once. When the
// server is closed or has MaxConnections connections already, nc is closed
// instead. When the connection ends, everything it acquired is released.
func (s *Server) ServeConn(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if s.opts.MaxConnections > 0 && len(s.conns) >= s.opts.MaxConnections {
		s.mu.Unlock()
		s.rejected.Add(1)
		s.log.Debug().Stringer("remote", nc.RemoteAddr()).Int("max", s.opts.MaxConnections).Msg("counter connection refused: too many")
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()

	s.currConns.Add(1)
	s.totalConns.Add(1)
	if s.opts.Observer != nil {
		s.opts.Observer.OnConn(1)
	}
	go c.serve()
}

// forget is called by a connection's goroutine as it ends.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.currConns.Add(-1)
	if s.opts.Observer != nil {
		s.opts.Observer.OnConn(-1)
	}
	s.wg.Done()
}

// Close stops the server: it closes every listener and every connection
// (releasing what each held), cancels store calls in flight, stops the GC
// loop and waits for all of the server's goroutines. It does not close the
// stores. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Stats returns the statistics a Stats request answers: the 15 pairs of the
// reference server in its order, then command counts of extension opcodes,
// then ours. When the resource store fails, its figures are 0.
func (s *Server) Stats() []wire.Stat {
	ctx, cancel := s.storeContext()
	defer cancel()
	stats, _ := s.stats(ctx)
	return stats
}

// stats is Stats with the resource store's error.
func (s *Server) stats(ctx context.Context) ([]wire.Stat, error) {
	ts, err := s.res.Stats(ctx)
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	stats := []wire.Stat{
		{Name: "objects", Value: i(ts.Objects)},
		{Name: "total_objects", Value: u(ts.TotalObjects)},
		{Name: "used_memory", Value: i(ts.UsedMemory)},
		{Name: "conflicts", Value: u(ts.Conflicts)},
		{Name: "gc_count", Value: u(ts.GCCount)},
		{Name: "last_gc_elapsed", Value: i(ts.LastGCElapsed.Microseconds())},
		{Name: "total_gc_elapsed", Value: i(ts.TotalGCElapsed.Microseconds())},
		{Name: "curr_connections", Value: i(s.currConns.Load())},
		{Name: "total_connections", Value: u(s.totalConns.Load())},
	}
	for _, op := range wire.Opcodes() {
		stats = append(stats, wire.Stat{Name: "command:" + op.String(), Value: u(s.commands[op].Load())})
	}
	return append(stats,
		wire.Stat{Name: "rejected_connections", Value: u(s.rejected.Load())},
		wire.Stat{Name: "stats_interval", Value: i(int64(s.res.Interval() / time.Second))},
		wire.Stat{Name: "reclaimed_objects", Value: u(ts.Reclaimed)},
	), err
}

// resourceContext returns the context of one resource store call: that of
// storeContext, except for the memory table, whose calls never block and
// get the server's context as it is (no timer per request).
func (s *Server) resourceContext() (context.Context, context.CancelFunc) {
	if s.table != nil {
		return s.ctx, func() {}
	}
	return s.storeContext()
}

// storeContext returns the context of one store call, ended by the store
// timeout or by Close.
func (s *Server) storeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.stores.Timeout)
}
