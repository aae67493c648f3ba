package counters

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vkcounter/vkcounter/counters/resource"
)

// A ResourceStore holds the resource counters the protocol's Acquire,
// Release and Get (through a holder's Do), Stats and Dump act on. The
// server makes one holder per connection. Errors are those of package resource; resource.ErrStore
// means the store failed and is answered wire.StatusStoreFailure.
type ResourceStore interface {
	// NewHolder returns the holdings of a new connection. The store calls
	// lost when the holder's holdings can no longer be vouched for; the
	// server then closes the connection.
	NewHolder(lost func()) ResourceHolder
	// Dump calls fn for every counter.
	Dump(ctx context.Context, fn func(resource.Entry) error) error
	// Stats returns the store's statistics.
	Stats(ctx context.Context) (resource.Stats, error)
	// Interval returns the statistics interval.
	Interval() time.Duration
}

// A ResourceHolder is what one connection holds. Its methods are called
// from the connection's goroutine only.
type ResourceHolder interface {
	// Do runs the acquires, releases and gets of ops in order, in one
	// round trip to the store where it has them, and returns one result
	// per op (the slice may be the holder's own, valid until its next
	// call). Every resource request of the port goes through it: a single
	// request is a batch of one.
	Do(ctx context.Context, ops []resource.Op) []resource.Result
	// ReleaseAll gives back everything the holder holds; the holder is not
	// used afterwards.
	ReleaseAll(ctx context.Context)
}

// RedisResources returns the ResourceStore of a resource.Redis: counters
// shared by every server on the same Redis. The caller closes r after the
// servers using it.
func RedisResources(r *resource.Redis) ResourceStore { return redisResources{r} }

type redisResources struct{ *resource.Redis }

func (r redisResources) NewHolder(lost func()) ResourceHolder { return r.Redis.NewHolder(lost) }

// memoryResources is the ResourceStore of a resource.Table, in this
// process only. Its calls never block, so contexts are not needed.
type memoryResources struct{ *resource.Table }

func (m memoryResources) NewHolder(func()) ResourceHolder {
	return &memoryHolder{Holder: m.Table.NewHolder(), t: m.Table}
}

func (m memoryResources) Dump(_ context.Context, fn func(resource.Entry) error) error {
	return m.Table.Dump(fn)
}

func (m memoryResources) Stats(context.Context) (resource.Stats, error) { return m.Table.Stats(), nil }

// memoryHolder runs a connection's ops on the table one after another; its
// results slice is reused from one Do to the next.
type memoryHolder struct {
	*resource.Holder
	t   *resource.Table
	res []resource.Result
}

func (h *memoryHolder) Do(_ context.Context, ops []resource.Op) []resource.Result {
	h.res = slices.Grow(h.res[:0], len(ops))[:len(ops)]
	for i, op := range ops {
		var r resource.Result
		switch op.Kind {
		case resource.OpAcquire:
			r.Err = h.Holder.Acquire(op.Name, op.Resources, op.Maximum)
		case resource.OpRelease:
			r.Err = h.Holder.Release(op.Name, op.Resources)
		case resource.OpGet:
			r.Value, r.Err = h.t.Get(op.Name)
		default:
			r.Err = fmt.Errorf("%w: operation %d", resource.ErrInvalid, op.Kind)
		}
		h.res[i] = r
	}
	return h.res
}

func (h *memoryHolder) ReleaseAll(context.Context) { h.Holder.ReleaseAll() }

var (
	_ ResourceStore = memoryResources{}
	_ ResourceStore = redisResources{}
)
