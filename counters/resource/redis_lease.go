package resource

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// renewEvery is how often leases are renewed, and the time limit of one
// renewal round.
func (r *Redis) renewEvery() time.Duration { return r.lease / 4 }

// margin is how long before its lease ends in Redis a holding is given up
// locally: a renewal may take renewEvery, the check runs every checkEvery,
// and the rest covers the clock rates of this host and Redis differing.
func (r *Redis) margin() time.Duration { return r.lease / 4 }

// checkEvery is how often holdings past their local deadline are given up.
func (r *Redis) checkEvery() time.Duration { return r.lease / 20 }

// validUntil is the local deadline of a lease renewed by a call sent at t0:
// Redis set it to expire lease after it ran the call, so at least lease
// after t0; give it up margin earlier.
func (r *Redis) validUntil(t0 time.Time) time.Time { return t0.Add(r.lease - r.margin()) }

// every calls fn every d, and whenever wake (which may be nil) receives,
// until Close.
func (r *Redis) every(d time.Duration, wake <-chan struct{}, fn func()) {
	defer r.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-wake:
		case <-t.C:
		}
		fn()
	}
}

// renewing renews the leases every renewEvery and, after a round that
// failed, again after checkEvery until one succeeds: a failover under way
// makes the clients reload the cluster's slot map, and the next round
// reaches the new master. A holding thus survives a failover shorter than
// half a lease. (renew.lua only moves deadlines later, so a round repeated
// is harmless.)
//
// A round begins renewEvery (or checkEvery) after the previous one began,
// however long that one took, as a ticker's would.
func (r *Redis) renewing() {
	defer r.wg.Done()
	t := time.NewTimer(r.renewEvery())
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		began := time.Now()
		next := r.renewEvery()
		if !r.renew() {
			next = r.checkEvery()
		}
		t.Reset(time.Until(began.Add(next)))
	}
}

// renew renews every lease of this instance once, and reports whether
// every renewal got its answer.
func (r *Redis) renew() bool {
	type held struct {
		name    string
		holders []*RedisHolder
		leases  []*lease
	}
	r.mu.Lock()
	round := make([]held, 0, len(r.names))
	for name, hs := range r.names {
		e := held{name: name}
		for h, l := range hs {
			e.holders = append(e.holders, h)
			e.leases = append(e.leases, l)
		}
		round = append(round, e)
	}
	r.mu.Unlock()
	if len(round) == 0 {
		return true
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.renewEvery())
	defer cancel()
	lost := map[*RedisHolder]bool{}
	failed, err := redisconn.RunEach(ctx, r.renewRdb, len(round), func(i int) (*redis.Script, []string, []any) {
		a := []any{r.lease.Milliseconds(), r.interval}
		for _, h := range round[i].holders {
			a = append(a, h.id)
		}
		return renewScript, r.keys([]byte(round[i].name)), a
	}, func(i int, cmd *redis.Cmd) {
		gone, err := cmd.StringSlice()
		if err != nil {
			return // not renewed: the check gives it up in time
		}
		isGone := map[string]bool{}
		for _, id := range gone {
			isGone[id] = true
		}
		until := r.validUntil(t0)
		e := round[i]
		r.mu.Lock()
		defer r.mu.Unlock()
		hs := r.names[e.name]
		for k, h := range e.holders {
			l := e.leases[k]
			switch {
			case hs[h] != l:
				// The holding ended (and maybe began again) meanwhile:
				// this renewal says nothing about the lease it has now.
			case !isGone[h.id]:
				// Redis had the holding and moved its deadline to at
				// least lease after it ran the renewal, so after t0.
				// That holds even with releases of it on their way: a
				// partial release (or a Release 0) keeps the holding's
				// deadline, and a full release ends the lease, which
				// then is no longer hs[h]. (Ignoring the renewal here
				// would give up a connection that always has a release
				// in flight, such as one touching its holding with
				// Release 0 back to back.)
				if until.After(l.until) {
					l.until = until
				}
			case l.releasing == 0:
				lost[h] = true
			default:
				// Gone, but a release of it is on its way: the renewal
				// may have run after that release ended the holding, so
				// it proves nothing. Were the holding lost, the release
				// finds out (release.lua answers -3, or -2 for a
				// holding this instance believes it has).
			}
		}
	})
	if err != nil {
		r.log.Warn().Err(err).Int("counters", len(round)).Int("not_renewed", failed).Msg("resource leases not renewed")
	}
	for h := range lost {
		r.log.Warn().Str("holder", h.id).Msg("resource holding expired in Redis: closing its connection")
		h.fail()
	}
	return err == nil
}

// check gives up the holders whose lease may end before it is renewed.
func (r *Redis) check() {
	now := time.Now()
	var late []*RedisHolder
	r.mu.Lock()
	for _, hs := range r.names {
		for h, l := range hs {
			if now.After(l.until) {
				late = append(late, h)
			}
		}
	}
	r.mu.Unlock()
	for _, h := range late {
		if !h.gone.Load() {
			r.log.Error().Str("holder", h.id).Stringer("lease", r.lease).
				Msg("resource lease not renewed in time: closing the connection that holds it")
		}
		h.fail()
	}
}
