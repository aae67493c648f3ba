package outbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// blockers are the connections the outbox opens of its own for reads that
// wait: Redis cannot cancel such a read, so each runs on a connection that
// is closed to end it. An idle one is kept for the next wait.
type blockers struct {
	mu     sync.Mutex
	idle   map[string][]*redis.Client // idle connections, by server address
	live   map[*redis.Client]struct{} // every connection open, idle or in use
	hooks  []redis.Hook               // added to every connection (AddHook)
	closed bool                       // Close was called
}

// blocker returns a client of its own (one connection) for a read of group
// that waits, or nil when the client given to New is neither a
// *redis.Client nor a *redis.ClusterClient (that read then cannot be
// ended early). Give it back with o.blockers.put.
func (o *Outbox) blocker(ctx context.Context, group int) (*redis.Client, error) {
	var server *redis.Client
	switch c := o.rdb.(type) {
	case *redis.Client:
		server = c
	case *redis.ClusterClient:
		var err error
		if server, err = c.MasterForKey(ctx, o.key(group)); err != nil {
			return nil, fmt.Errorf("outbox: find the server of community %d: %w", group, err)
		}
	default:
		return nil, nil
	}
	return o.blockers.get(*server.Options())
}

// get returns an idle connection to opt.Addr, or opens one.
func (b *blockers) get(opt redis.Options) (*redis.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	if free := b.idle[opt.Addr]; len(free) > 0 {
		bc := free[len(free)-1]
		b.idle[opt.Addr] = free[:len(free)-1]
		return bc, nil
	}
	opt.PoolSize, opt.MaxActiveConns, opt.MinIdleConns, opt.MaxIdleConns = 1, 1, 0, 1
	// Options() holds go-redis's normalised values: "no retries" (-1)
	// reads 0 there, which NewClient would turn into 3 retries.
	opt.MaxRetries = -1
	opt.PushNotificationProcessor = nil // the new client's own, not server's
	bc := redis.NewClient(&opt)
	for _, h := range b.hooks {
		bc.AddHook(h)
	}
	if b.live == nil {
		b.live = map[*redis.Client]struct{}{}
	}
	b.live[bc] = struct{}{}
	return bc, nil
}

// put keeps bc for the next waiting read, or closes it when it is not
// reusable (its wait was ended by closing it) or the outbox is closed.
func (b *blockers) put(bc *redis.Client, reusable bool) {
	b.mu.Lock()
	if reusable && !b.closed {
		addr := bc.Options().Addr
		if b.idle == nil {
			b.idle = map[string][]*redis.Client{}
		}
		b.idle[addr] = append(b.idle[addr], bc)
		b.mu.Unlock()
		return
	}
	delete(b.live, bc)
	b.mu.Unlock()
	bc.Close()
}

// AddHook adds h to the connections the outbox opens of its own, for
// reads that wait (see Take), present and future. Hooks of the client
// given to New see every other call.
func (o *Outbox) AddHook(h redis.Hook) {
	b := &o.blockers
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, h)
	for bc := range b.live {
		bc.AddHook(h)
	}
}

// Close closes the connections the outbox opened of its own (see Take),
// which ends the waits under way, and ends the watch of the figures
// Stats reports; the client given to New stays open. A
// Take that waits fails after it.
func (o *Outbox) Close() error {
	o.stopWatch()
	b := &o.blockers
	b.mu.Lock()
	b.closed = true
	live := b.live
	b.idle, b.live = nil, nil
	b.mu.Unlock()
	for bc := range live {
		bc.Close()
	}
	return nil
}
