package resource

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// A RedisHolder is what one connection holds in a Redis store. It is not
// safe for concurrent use, except that the store may call its lost
// function from its own goroutine.
type RedisHolder struct {
	r    *Redis
	id   string
	held map[string]uint32
	// unsure names the counters an acquire of which has an unknown
	// outcome (no answer): Redis may hold them for the holder, which was
	// failed, so ReleaseAll drops them too.
	unsure map[string]struct{}
	lost   func()
	// gone is set once the holder was told it lost its holdings.
	gone atomic.Bool
}

// NewHolder returns a holder that holds nothing. lost is called (once, from
// any goroutine) when the holder's holdings can no longer be vouched for:
// a lease could not be renewed in time, Redis says a holding expired or no
// longer has it, or a call's outcome is unknown. The holder's owner must
// then end it (the counter port closes the client's connection, which is
// how a client learns its holdings are gone) and call ReleaseAll; every
// later call but a Get fails.
func (r *Redis) NewHolder(lost func()) *RedisHolder {
	return &RedisHolder{
		r:    r,
		id:   r.instance + ":" + strconv.FormatUint(r.holders.Add(1), 10),
		held: map[string]uint32{},
		lost: lost,
	}
}

// errLost is returned by the calls of a holder that lost its holdings.
var errLost = fmt.Errorf("%w: the holder lost its holdings", ErrStore)

// fail tells the holder's owner that its holdings are lost.
func (h *RedisHolder) fail() {
	if h.gone.CompareAndSwap(false, true) && h.lost != nil {
		h.lost()
	}
}

// Acquire adds resources to the named counter, as Holder.Acquire. An error
// wrapping ErrStore means the outcome is unknown, or that Redis no longer
// has a holding this instance believed the holder had; the holder has then
// been failed.
func (h *RedisHolder) Acquire(ctx context.Context, name []byte, resources, maximum uint32) error {
	return h.Do(ctx, []Op{{Kind: OpAcquire, Name: name, Resources: resources, Maximum: maximum}})[0].Err
}

// Release gives back resources of the named counter, as Holder.Release.
// An error wrapping ErrStore means the outcome is unknown, or that Redis
// no longer has a holding this instance believed the holder had (so a
// Release that Redis refuses, though this instance would not have, fails
// the holder too); the holder has then been failed.
func (h *RedisHolder) Release(ctx context.Context, name []byte, resources uint32) error {
	return h.Do(ctx, []Op{{Kind: OpRelease, Name: name, Resources: resources}})[0].Err
}

// forget removes h from the holders of name.
func (r *Redis) forget(name string, h *RedisHolder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hs := r.names[name]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(r.names, name)
		}
	}
}

// Held returns how many resources of the named counter this holder holds,
// as far as this instance knows.
func (h *RedisHolder) Held(name string) uint32 { return h.held[name] }

// ReleaseAll gives back everything the holder holds, and leaves it
// empty; the holder must not be used afterwards. Its holdings go to the
// store's dropper (see dropper), which drops the holdings of every holder
// ended meanwhile in one script per counter; ReleaseAll waits for that
// round until ctx ends. A drop that fails is tried again every renewEvery
// until it succeeds, so a closed connection's holdings leave Redis soon
// after it closes, not when the counter is next touched. The counters
// whose acquire had an unknown outcome (the holder was failed for it) are
// dropped too, and once more a lease later: the acquire may still run
// after the first drop.
func (h *RedisHolder) ReleaseAll(ctx context.Context) {
	h.gone.Store(true)
	if len(h.held) == 0 && len(h.unsure) == 0 {
		return
	}
	r := h.r
	now := time.Now()
	ds := make([]drop, 0, len(h.held)+2*len(h.unsure))
	for name := range h.held {
		ds = append(ds, drop{name: name, holder: h.id})
		r.forget(name, h)
	}
	for name := range h.unsure {
		if h.held[name] == 0 {
			ds = append(ds, drop{name: name, holder: h.id})
		}
		ds = append(ds, drop{name: name, holder: h.id, at: now.Add(r.lease).UnixNano()})
	}
	h.held, h.unsure = map[string]uint32{}, nil
	select {
	case <-r.drops.add(ds):
	case <-r.stop:
	case <-ctx.Done():
		r.log.Warn().Err(ctx.Err()).Int("counters", len(ds)).Stringer("lease", r.lease).
			Msg("the resource holdings of a closed connection are not released in Redis yet; tried again every renewal round")
	}
}
