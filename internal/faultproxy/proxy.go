// Package faultproxy is a TCP proxy that injects the network faults a
// client of a server (Redis, in this project) meets in production, without
// touching the server itself, which may be shared:
//
//   - Cut closes every connection and refuses new ones, as a dead server.
//   - Stall holds every byte in both directions while keeping every
//     connection open, as a paused server, a slow fork, a failover or a
//     network stall looks to the client; Resume delivers what was held, in
//     order.
//   - SetLatency delays every chunk of bytes in each direction.
//
// Faults can be combined and changed at any time; a Proxy is safe for
// concurrent use. Tests use it through internal/redistest.NewProxy; the
// load tool runs one in front of the bot's Redis.
package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// dialTimeout bounds the connection to the target for each accepted
	// client.
	dialTimeout = 5 * time.Second
	// chunkSize is the largest read forwarded as one chunk.
	chunkSize = 32 << 10
	// queueChunks is how many chunks a direction holds while stalled or
	// delayed before it stops reading (and TCP pushes back on the sender).
	queueChunks = 64
)

// A Proxy forwards TCP connections from its address to a target and can
// cut, stall or slow them.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every pipe goroutine

	mu      sync.Mutex // guards the fields below
	down    bool
	flowing chan struct{} // closed while not stalled; replaced by Stall
	latency time.Duration
	links   map[*link]struct{}
	closed  bool
}

// New starts a proxy on 127.0.0.1:0 in front of target (host:port). Close
// it when done.
func New(target string) (*Proxy, error) {
	return Listen("127.0.0.1:0", target)
}

// Listen is New on the given listen address.
func Listen(addr, target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{target: target, ln: ln, flowing: flowing, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut closes every open connection, dropping any bytes held, and closes new
// ones at once, as a dead server would, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Drop()
}

// Drop closes every open connection, dropping any bytes held, as a server
// closing its clients' connections would; new connections go through.
func (p *Proxy) Drop() {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Open is how many connections are open through the proxy now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Restore lets connections through again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Stall stops forwarding in both directions, keeping every connection
// open. Bytes sent meanwhile are held (up to a bounded amount per
// direction, after which TCP pushes back on the sender) and delivered in
// order by Resume. New connections are accepted and stalled too. Stalling
// a stalled proxy does nothing.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default: // already stalled
	}
}

// Resume ends a Stall: what was held is delivered, in order, and bytes flow
// again. Resuming a proxy that is not stalled does nothing.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// SetLatency delays every chunk of bytes by d in each direction, counted
// from when the proxy read it; chunks stay in order and a connection keeps
// several in flight, so latency does not cap throughput. Zero removes the
// delay. It applies to chunks read from then on.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = max(d, 0)
}

// Close stops the proxy, closes every connection and waits for its
// goroutines. It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// snapshot returns the open links. p.mu must be held.
func (p *Proxy) snapshot() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down || p.closed
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, dialTimeout)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: up, done: make(chan struct{})}
		l.open.Store(2)
		p.mu.Lock()
		if p.down || p.closed { // cut while dialing
			p.mu.Unlock()
			l.close()
			continue
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(4)
		go p.forward(l, up, c)
		go p.forward(l, c, up)
	}
}

// A link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn
	open           atomic.Int32 // directions not yet ended
	once           sync.Once
	done           chan struct{} // closed by close
}

// close closes both connections and wakes goroutines waiting to deliver.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
	})
}

// end closes l and forgets it.
func (p *Proxy) end(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// A chunk is bytes read from one side, with the time they are due at the
// other.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst through a bounded queue: one goroutine reads
// and stamps each chunk with its due time, another waits for the proxy to
// flow and the chunk to be due, then writes it. Either end failing closes
// the link.
func (p *Proxy) forward(l *link, dst, src net.Conn) {
	queue := make(chan chunk, queueChunks)
	go func() { // reader
		defer p.wg.Done()
		defer close(queue)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				due := time.Now().Add(p.latency)
				p.mu.Unlock()
				select {
				case queue <- chunk{bytes.Clone(buf[:n]), due}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					p.end(l)
				}
				return
			}
		}
	}()
	defer p.wg.Done()
	for c := range queue {
		if !p.wait(l, c.due) {
			p.end(l)
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			p.end(l)
			return
		}
	}
	// src ended cleanly: pass the half-close on, as the peer would see it,
	// and end the link once both directions have.
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && l.open.Add(-1) > 0 {
		if cw.CloseWrite() == nil {
			return
		}
	}
	p.end(l)
}

// wait blocks until the proxy is not stalled and due has passed; it
// returns false if the link closed first.
func (p *Proxy) wait(l *link, due time.Time) bool {
	for {
		p.mu.Lock()
		flowing := p.flowing
		p.mu.Unlock()
		select {
		case <-flowing:
		case <-l.done:
			return false
		}
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return false
			}
		}
		// A Stall may have begun while this chunk waited for its due time.
		p.mu.Lock()
		still := p.flowing == flowing
		p.mu.Unlock()
		if still {
			return true
		}
	}
}
