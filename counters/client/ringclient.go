package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// DefaultDNSRefresh is how often a RingClient re-resolves RingOptions.DNS
// unless told otherwise.
const DefaultDNSRefresh = 30 * time.Second

// RingOptions configure a RingClient. Zero fields mean the documented
// defaults.
type RingOptions struct {
	// VirtualNodes is the number of points per server on the ring
	// (default DefaultVirtualNodes). Every client of a set of servers
	// must use the same value.
	VirtualNodes int
	// DNS, when not empty, is a "host:port" whose host is resolved (A and
	// AAAA records, e.g. Fly's <app>.internal) into the servers, instead
	// of the addresses given to NewRingClient, and re-resolved every
	// DNSRefresh.
	DNS string
	// DNSRefresh is how often DNS is re-resolved (default
	// DefaultDNSRefresh).
	DNSRefresh time.Duration
	// LookupHost resolves the host of DNS into addresses (default
	// net.DefaultResolver.LookupHost).
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// OnDNSError, when not nil, is told about failed re-resolutions; the
	// servers stay as they were.
	OnDNSError func(error)
}

// A RingClient talks to several counter servers, sending each named
// request to the server that owns the name on a Ring and Noop, Stats and
// Dump to every server (see Each). It works with any server speaking the
// counter protocol, yrmcds included (the extension opcodes need vkcounter
// servers).
//
// It holds one connection per server, dialled on first use. Resources
// acquired through a RingClient are held on that connection until released
// or until the RingClient is closed; a Release goes to the server the
// name's holdings were acquired on, even when the ring has changed since.
// When a connection fails, the call returns its error, the holdings on that
// server are gone (the server released them when the connection closed),
// and the next call to that server dials again.
//
// Its methods are safe for concurrent use.
type RingClient struct {
	opts RingOptions

	mu sync.Mutex
	// ring, conns, held and closed are guarded by mu.
	ring  *Ring
	conns map[string]*ringConn
	// held records, per name, where this client's holdings are and how
	// many resources they are.
	held   map[string]holding
	closed bool

	stop chan struct{}  // closed by Close, ends the DNS refresh
	wg   sync.WaitGroup // the DNS refresh goroutine
}

// A holding is what a RingClient holds of one name, and on which server.
type holding struct {
	addr string
	n    uint64
}

// A ringConn is the connection to one server, dialled on first use. A
// call holds its mu for the whole call, recording what it acquired or
// released before letting go. Lock order: a ringConn's mu, then the
// RingClient's.
type ringConn struct {
	mu sync.Mutex
	// c and retired are guarded by mu. c is nil until dialled and after a
	// failure.
	c *Client
	// retired is set when the entry leaves RingClient.conns (its server
	// left the ring, or the client closed). It is never dialled again: a
	// call that fetched it before then uses the current entry instead, so
	// that every open connection is one Close and Hold can see.
	retired bool
}

// NewRingClient returns a client of the servers at addrs (host:port), or
// of the servers RingOptions.DNS resolves to. Nothing is dialled yet,
// except the DNS lookup, which must give at least one address.
func NewRingClient(ctx context.Context, addrs []string, opts RingOptions) (*RingClient, error) {
	if opts.DNSRefresh < 0 {
		return nil, fmt.Errorf("counters: ring: DNS refresh %v: must not be negative", opts.DNSRefresh)
	}
	if opts.DNSRefresh == 0 {
		opts.DNSRefresh = DefaultDNSRefresh
	}
	if opts.LookupHost == nil {
		opts.LookupHost = net.DefaultResolver.LookupHost
	}
	rc := &RingClient{opts: opts, conns: map[string]*ringConn{}, held: map[string]holding{}, stop: make(chan struct{})}
	if opts.DNS != "" {
		if len(addrs) > 0 {
			return nil, errors.New("counters: ring: give addresses or DNS, not both")
		}
		var err error
		if addrs, err = rc.resolve(ctx); err != nil {
			return nil, err
		}
	}
	if err := rc.SetServers(addrs); err != nil {
		return nil, err
	}
	if opts.DNS != "" {
		rc.wg.Add(1)
		go rc.refresh()
	}
	return rc, nil
}

// resolve looks up RingOptions.DNS and returns the servers' addresses.
func (rc *RingClient) resolve(ctx context.Context) ([]string, error) {
	host, port, err := net.SplitHostPort(rc.opts.DNS)
	if err != nil {
		return nil, fmt.Errorf("counters: ring: DNS %q: %w", rc.opts.DNS, err)
	}
	ips, err := rc.opts.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("counters: ring: resolve %s: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("counters: ring: %s resolves to no address", host)
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}

// refresh re-resolves RingOptions.DNS every DNSRefresh until Close.
func (rc *RingClient) refresh() {
	defer rc.wg.Done()
	t := time.NewTicker(rc.opts.DNSRefresh)
	defer t.Stop()
	for {
		select {
		case <-rc.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), rc.opts.DNSRefresh)
		addrs, err := rc.resolve(ctx)
		cancel()
		if err == nil {
			err = rc.SetServers(addrs)
		}
		if err != nil && rc.opts.OnDNSError != nil {
			rc.opts.OnDNSError(err)
		}
	}
}

// SetServers replaces the servers of the ring: only the names the added or
// removed servers gain or lose move. Connections to removed servers stay
// open while this client holds resources there (so that releases reach
// them) and are closed otherwise.
func (rc *RingClient) SetServers(addrs []string) error {
	r, err := NewRing(addrs, rc.opts.VirtualNodes)
	if err != nil {
		return err
	}
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return errRingClosed
	}
	rc.ring = r
	var gone []string
	for addr := range rc.conns {
		if !onRing(r, addr) {
			gone = append(gone, addr)
		}
	}
	rc.mu.Unlock()
	for _, addr := range gone {
		rc.retire(addr)
	}
	return nil
}

// retire closes and forgets the connection to addr if its server is off
// the ring and this client holds nothing there. Taking the connection's
// lock first waits for a call under way on it, which records its holdings
// before letting go: one that acquired there keeps the connection open.
func (rc *RingClient) retire(addr string) {
	rc.mu.Lock()
	conn := rc.conns[addr]
	rc.mu.Unlock()
	if conn == nil {
		return
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	// Closed, re-added or retired meanwhile: nothing to do.
	if rc.conns[addr] != conn || onRing(rc.ring, addr) || rc.holdsOn(addr) {
		return
	}
	delete(rc.conns, addr)
	conn.retire()
}

func onRing(r *Ring, addr string) bool {
	_, ok := slices.BinarySearch(r.servers, addr)
	return ok
}

// holdsOn reports whether the client holds resources on addr. The caller
// holds rc.mu.
func (rc *RingClient) holdsOn(addr string) bool {
	for _, h := range rc.held {
		if h.addr == addr {
			return true
		}
	}
	return false
}

var errRingClosed = errors.New("counters: ring client closed")

// Servers returns the servers of the ring, sorted.
func (rc *RingClient) Servers() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.ring.servers)
}

// Owner returns the server the name belongs to.
func (rc *RingClient) Owner(name string) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ring.Owner(name)
}

// Close closes every connection, which releases everything this client
// holds, and stops the DNS refresh.
func (rc *RingClient) Close() error {
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return nil
	}
	rc.closed = true
	close(rc.stop)
	conns := rc.conns
	rc.conns = nil
	rc.held = nil
	rc.mu.Unlock()
	for _, conn := range conns {
		conn.mu.Lock()
		conn.retire()
		conn.mu.Unlock()
	}
	rc.wg.Wait()
	return nil
}

// Hold blocks while every connection this client has open stays open,
// holding what was acquired on it, until ctx ends (it returns nil) or one
// of them is lost (it returns that error, naming the server: what was held
// there is gone, and Held no longer reports it). Only ctx bounds it: the
// deadlines of earlier calls do not. No other call may be made meanwhile.
func (rc *RingClient) Hold(ctx context.Context) error {
	type open struct {
		addr string
		conn *ringConn
		c    *Client
	}
	rc.mu.Lock()
	entries := make(map[string]*ringConn, len(rc.conns))
	for addr, conn := range rc.conns {
		entries[addr] = conn
	}
	rc.mu.Unlock()
	var conns []open
	for addr, conn := range entries {
		conn.mu.Lock()
		if conn.c != nil {
			conns = append(conns, open{addr, conn, conn.c})
		}
		conn.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(conns))
	for _, o := range conns {
		go func() {
			err := o.c.Hold(ctx)
			if err != nil {
				rc.drop(o.addr, o.conn, o.c)
				err = fmt.Errorf("%s: %w", o.addr, err)
				cancel() // the others stop holding: the caller learns of the loss now
			}
			errs <- err
		}()
	}
	var first error
	for range conns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// retire closes the connection for good. The caller holds c.mu.
func (c *ringConn) retire() {
	c.retired = true
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// drop closes c, the lost connection of conn to addr, unless it was
// already replaced, and forgets the holdings there.
func (rc *RingClient) drop(addr string, conn *ringConn, c *Client) {
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if conn.c != c {
		return
	}
	c.Close()
	conn.c = nil
	rc.forgetHoldings(addr)
}

// conn returns the connection entry of addr, creating it.
func (rc *RingClient) conn(addr string) (*ringConn, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		return nil, errRingClosed
	}
	c := rc.conns[addr]
	if c == nil {
		c = &ringConn{}
		rc.conns[addr] = c
	}
	return c, nil
}

// lockConn returns the current connection entry of addr, creating it,
// with its mu locked.
func (rc *RingClient) lockConn(addr string) (*ringConn, error) {
	conn, err := rc.conn(addr)
	if err != nil {
		return nil, err
	}
	return rc.lockFetched(addr, conn)
}

// lockFetched locks conn, the entry of addr fetched from rc.conns, and
// returns it, or, if it was retired since it was fetched (SetServers or
// Close got to it first), the current entry, locked: a retired entry is
// never dialled, since no map would hold its connection.
func (rc *RingClient) lockFetched(addr string, conn *ringConn) (*ringConn, error) {
	for {
		conn.mu.Lock()
		if !conn.retired {
			return conn, nil
		}
		conn.mu.Unlock()
		var err error
		if conn, err = rc.conn(addr); err != nil {
			return nil, err
		}
	}
}

// do runs fn with the client of addr, dialling it if needed, holding the
// connection's lock throughout. When the Client is left unusable (the
// connection failed, or its stream is out of step), the connection is
// closed (the server then releases what it held) and the holdings
// recorded on addr are forgotten. Any other error (an error status,
// invalid arguments, a context ended before anything was sent, an error
// of fn's own) leaves the connection and its holdings as they were.
func (rc *RingClient) do(ctx context.Context, addr string, fn func(c *Client) error) error {
	conn, err := rc.lockConn(addr)
	if err != nil {
		return err
	}
	defer conn.mu.Unlock()
	if conn.c == nil {
		c, err := dial(ctx, addr)
		if err != nil {
			return fmt.Errorf("counters: cannot connect to %s: %w", addr, err)
		}
		conn.c = c
	}
	err = fn(conn.c)
	if err == nil {
		return nil
	}
	if conn.c.broken() {
		conn.c.Close()
		conn.c = nil
		rc.forgetHoldings(addr)
		return fmt.Errorf("counters: server %s: %w", addr, err)
	}
	var se *wire.StatusError
	if errors.As(err, &se) || errors.Is(err, wire.ErrInvalid) {
		return err
	}
	return fmt.Errorf("counters: server %s: %w", addr, err)
}

// forgetHoldings drops the holdings recorded on addr, whose connection
// closed. The caller holds the lock of addr's connection.
func (rc *RingClient) forgetHoldings(addr string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for name, h := range rc.held {
		if h.addr == addr {
			delete(rc.held, name)
		}
	}
}

// owned runs fn with the client of the server owning name.
func (rc *RingClient) owned(ctx context.Context, name string, fn func(c *Client) error) error {
	return rc.do(ctx, rc.Owner(name), fn)
}

// Acquire acquires resources of the named counter on the server owning
// it; see Client.Acquire.
func (rc *RingClient) Acquire(ctx context.Context, name string, resources, maximum uint32) (uint32, error) {
	rc.mu.Lock()
	addr := rc.ring.Owner(name)
	if h, ok := rc.held[name]; ok {
		// More of a name already held goes where the rest is.
		addr = h.addr
	}
	rc.mu.Unlock()
	var v uint32
	err := rc.do(ctx, addr, func(c *Client) (err error) {
		if v, err = c.Acquire(ctx, name, resources, maximum); err == nil {
			rc.record(name, addr, int64(resources))
		}
		return err
	})
	return v, err
}

// record adds delta to what this client holds of name on addr; a release
// (delta < 0) takes away at most what is held. The caller holds the lock
// of addr's connection, so that the holding is recorded before anything
// can close that connection.
func (rc *RingClient) record(name, addr string, delta int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.held == nil {
		return // closed
	}
	n := int64(rc.held[name].n) + delta
	if n <= 0 {
		delete(rc.held, name)
		return
	}
	rc.held[name] = holding{addr: addr, n: uint64(n)}
}

// Release gives back resources of the named counter to the server they
// were acquired on (the owner, when this client holds none of it).
func (rc *RingClient) Release(ctx context.Context, name string, resources uint32) error {
	rc.mu.Lock()
	addr := rc.ring.Owner(name)
	if h, ok := rc.held[name]; ok {
		addr = h.addr
	}
	rc.mu.Unlock()
	return rc.do(ctx, addr, func(c *Client) error {
		err := c.Release(ctx, name, resources)
		if err == nil {
			rc.record(name, addr, -int64(resources))
		}
		return err
	})
}

// Get returns the consumption of the named counter from its owner.
func (rc *RingClient) Get(ctx context.Context, name string) (v uint32, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.Get(ctx, name); return err })
	return v, err
}

// Hit adds one to the named access counter on its owner.
func (rc *RingClient) Hit(ctx context.Context, name string) (v int64, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.Hit(ctx, name); return err })
	return v, err
}

// Add adds delta to the named access counter on its owner.
func (rc *RingClient) Add(ctx context.Context, name string, delta int64) (v int64, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.Add(ctx, name, delta); return err })
	return v, err
}

// Total returns the total of the named access counter from its owner.
func (rc *RingClient) Total(ctx context.Context, name string) (v int64, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.Total(ctx, name); return err })
	return v, err
}

// Visit records key under the named participant counter on its owner.
func (rc *RingClient) Visit(ctx context.Context, name, key string, timeout time.Duration) (active int, isNew bool, err error) {
	err = rc.owned(ctx, name, func(c *Client) error {
		active, isNew, err = c.Visit(ctx, name, key, timeout)
		return err
	})
	return active, isNew, err
}

// Leave forgets key under the named participant counter on its owner.
func (rc *RingClient) Leave(ctx context.Context, name, key string) (active int, removed bool, err error) {
	err = rc.owned(ctx, name, func(c *Client) error {
		active, removed, err = c.Leave(ctx, name, key)
		return err
	})
	return active, removed, err
}

// Active counts the keys of the named participant counter on its owner.
func (rc *RingClient) Active(ctx context.Context, name string, timeout time.Duration) (n int, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { n, err = c.Active(ctx, name, timeout); return err })
	return n, err
}

// Each calls fn with every server of the ring and its client, one server
// after another in address order: that is how Noop, Stats and Dump reach
// every server. It returns the errors of all servers joined, each naming
// its server.
func (rc *RingClient) Each(ctx context.Context, fn func(addr string, c *Client) error) error {
	var errs []error
	for _, addr := range rc.Servers() {
		err := rc.do(ctx, addr, func(c *Client) error { return fn(addr, c) })
		if err != nil {
			var se *wire.StatusError
			if errors.As(err, &se) {
				err = fmt.Errorf("counters: server %s: %w", addr, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Held returns how many resources of the named counter this client holds,
// and on which server.
func (rc *RingClient) Held(name string) (addr string, n uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	h := rc.held[name]
	return h.addr, h.n
}
