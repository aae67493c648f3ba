package resource

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// A drop is a release in Redis of everything holder holds of the counter
// name, due at (Unix nanoseconds; 0: at once).
type drop struct {
	name, holder string
	at           int64
}

// maxPendingDrops bounds the drops waiting (about 100 bytes each); past
// it, a closed connection's holding is not dropped by this instance and
// leaves Redis when a script touches its counter after its lease.
const maxPendingDrops = 500000

// maxDropHolders is the most holders one drop script releases.
const maxDropHolders = 1000

// A dropper keeps the drops of the holders that ended (ReleaseAll) until
// Redis has run them: a round, started at once by a new drop and every
// renewEvery for those that failed or were due later, sends one drop
// script per counter for all the holders that ended meanwhile (when 600
// connections close at once holding the same 300 counters, 300 scripts,
// not 180,000).
type dropper struct {
	wake chan struct{} // a round is wanted

	mu        sync.Mutex
	pending   map[drop]struct{}
	round     chan struct{} // closed when the round that takes the drops pending now has ended
	discarded int           // drops not kept (maxPendingDrops), not yet logged
}

func newDropper() dropper {
	return dropper{wake: make(chan struct{}, 1), pending: map[drop]struct{}{}, round: make(chan struct{})}
}

// add keeps ds for the next round, which it starts, and returns a channel
// closed when that round has ended (whether or not each drop succeeded).
func (d *dropper) add(ds []drop) <-chan struct{} {
	done := d.keep(ds)
	select {
	case d.wake <- struct{}{}:
	default: // a round is wanted already
	}
	return done
}

// keep keeps ds for a later round, up to maxPendingDrops in all, and
// returns the channel the next round closes.
func (d *dropper) keep(ds []drop) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range ds {
		if len(d.pending) >= maxPendingDrops {
			d.discarded++
			continue
		}
		d.pending[x] = struct{}{}
	}
	return d.round
}

// take removes and returns the drops due at now, and the channel their
// round closes, grouped by counter name; and how many drops were not
// kept since the last call.
func (d *dropper) take(now time.Time) (byName map[string][]string, done chan struct{}, discarded int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	byName = map[string][]string{}
	for x := range d.pending {
		if x.at <= now.UnixNano() {
			delete(d.pending, x)
			byName[x.name] = append(byName[x.name], x.holder)
		}
	}
	done, d.round = d.round, make(chan struct{})
	discarded, d.discarded = d.discarded, 0
	return byName, done, discarded
}

// dropRound runs the drops due, one script per counter and up to
// maxDropHolders holders, in one pipeline within renewEvery on the
// renewals' connections (never behind client requests), and keeps those
// that fail for the next round. drop.lua is harmless to repeat.
func (r *Redis) dropRound() {
	byName, done, discarded := r.drops.take(time.Now())
	defer close(done)
	if discarded > 0 {
		r.log.Warn().Int("drops", discarded).Int("most", maxPendingDrops).
			Msg("too many closed connections' resource holdings wait to be released in Redis: those past the most leave when their counter is next touched after their lease")
	}
	type job struct {
		name    string
		holders []string
	}
	var jobs []job
	for name, holders := range byName {
		for len(holders) > 0 {
			n := min(len(holders), maxDropHolders)
			jobs = append(jobs, job{name, holders[:n]})
			holders = holders[n:]
		}
	}
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.renewEvery())
	defer cancel()
	var failed []drop
	_, err := redisconn.RunEach(ctx, r.renewRdb, len(jobs), func(i int) (*redis.Script, []string, []any) {
		args := make([]any, 0, 1+len(jobs[i].holders))
		args = append(args, r.interval)
		for _, h := range jobs[i].holders {
			args = append(args, h)
		}
		return dropScript, r.keys([]byte(jobs[i].name)), args
	}, func(i int, cmd *redis.Cmd) {
		if cmd.Err() != nil {
			for _, h := range jobs[i].holders {
				failed = append(failed, drop{name: jobs[i].name, holder: h})
			}
		}
	})
	if err != nil {
		r.log.Warn().Err(err).Int("holdings", len(failed)).Stringer("lease", r.lease).
			Msg("some resource holdings of closed connections were not released in Redis; tried again every renewal round")
		r.drops.keep(failed) // for the next round, every renewEvery
	}
}
