package counters

import (
	"context"
	"time"

	"github.com/vkcounter/vkcounter/counters/resource"
)

// A ResourceStore holds the resource counters the protocol's Acquire,
// Release, Get, Stats and Dump act on. The server makes one holder per
// connection. Errors are those of package resource; resource.ErrStore
// means the store failed and is answered wire.StatusStoreFailure.
type ResourceStore interface {
	// NewHolder returns the holdings of a new connection. The store calls
	// lost when the holder's holdings can no longer be vouched for; the
	// server then closes the connection.
	NewHolder(lost func()) ResourceHolder
	// Get returns a counter's consumption.
	Get(ctx context.Context, name []byte) (uint32, error)
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
	Acquire(ctx context.Context, name []byte, resources, maximum uint32) error
	Release(ctx context.Context, name []byte, resources uint32) error
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

func (m memoryResources) NewHolder(func()) ResourceHolder { return memoryHolder{m.Table.NewHolder()} }

func (m memoryResources) Get(_ context.Context, name []byte) (uint32, error) {
	return m.Table.Get(name)
}

func (m memoryResources) Dump(_ context.Context, fn func(resource.Entry) error) error {
	return m.Table.Dump(fn)
}

func (m memoryResources) Stats(context.Context) (resource.Stats, error) { return m.Table.Stats(), nil }

type memoryHolder struct{ *resource.Holder }

func (h memoryHolder) Acquire(_ context.Context, name []byte, resources, maximum uint32) error {
	return h.Holder.Acquire(name, resources, maximum)
}

func (h memoryHolder) Release(_ context.Context, name []byte, resources uint32) error {
	return h.Holder.Release(name, resources)
}

func (h memoryHolder) ReleaseAll(context.Context) { h.Holder.ReleaseAll() }

var (
	_ ResourceStore = memoryResources{}
	_ ResourceStore = redisResources{}
)
