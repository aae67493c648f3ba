package outbox

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/age"
)

// A reading is what Stats reports of one community, and when it was read;
// community.mu guards it.
type reading struct {
	length  int64
	oldest  time.Time // when the oldest entry was added; zero if none
	at      time.Time // when this was read; zero if never
	busy    bool      // entries were handed out since: read again when due
	reading bool      // a refresh is under way
}

// Stats describes one community's outbox as last read.
type Stats struct {
	Length int64         // entries in the stream and replies set aside: see Report.Length
	Oldest time.Duration // age of the oldest of them, now
	// Age is how long ago Length and Oldest were read from Redis; -1 if
	// they never were.
	Age time.Duration
}

// Stats returns the last reading of group's outbox: its length and the age
// of its oldest entry. It makes no Redis call, so it answers at once
// whether Redis is up or not. Done reads it afresh with every batch of
// sent replies; Take, and a watch of its own (so that the figures move
// while no sender reads: VK down, say), read it at most every StatsEvery
// while entries wait, and not at all while the outbox stays empty and
// idle.
func (o *Outbox) Stats(group int) Stats {
	c := o.community(group)
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := &c.reading
	if rd.at.IsZero() {
		return Stats{Age: -1}
	}
	now := o.opts.Clock()
	s := Stats{Length: rd.length, Age: now.Sub(rd.at)}
	if !rd.oldest.IsZero() {
		s.Oldest = max(0, now.Sub(rd.oldest))
	}
	return s
}

// Len reads from Redis how many entries group's outbox holds now (see
// Report.Length), the replies set aside (see Later) included.
func (o *Outbox) Len(ctx context.Context, group int) (int64, error) {
	c := o.community(group)
	var xlen, later *redis.IntCmd
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		xlen, later = p.XLen(ctx, c.key), p.ZCard(ctx, c.laterKey())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: length: %w", err)
	}
	return xlen.Val() + later.Val(), nil
}

// noteTaken marks group as busy after a Take that handed out n entries and
// refreshes its reading when it is due.
func (o *Outbox) noteTaken(ctx context.Context, c *community, group, n int) {
	c.mu.Lock()
	rd := &c.reading
	if n > 0 {
		rd.busy = true
	}
	due := !rd.reading && (rd.busy || rd.length > 0) && o.opts.Clock().Sub(rd.at) >= o.opts.StatsEvery
	if due {
		rd.reading = true
	}
	c.mu.Unlock()
	if due {
		o.refreshStats(ctx, group)
	}
}

// watchStats reads, every StatsEvery until Close, the outbox of each
// community whose last reading held entries or that handed entries out
// since, unless a reading is fresher than StatsEvery: the figures keep
// telling the truth while no sender reads (a sender retrying VK reads
// nothing new, and replies pile up behind it). An empty and idle outbox
// costs no Redis call. Init starts it.
func (o *Outbox) watchStats() {
	defer o.watch.wg.Done()
	tick := time.NewTicker(o.opts.StatsEvery)
	defer tick.Stop()
	for {
		select {
		case <-o.watch.stop:
			return
		case <-tick.C:
		}
		o.watch.rounds.Add(1)
		o.mu.Lock()
		groups := make(map[int]*community, len(o.communities))
		maps.Copy(groups, o.communities)
		o.mu.Unlock()
		for g, c := range groups {
			c.mu.Lock()
			rd := &c.reading
			due := !rd.reading && (rd.busy || rd.length > 0) && o.opts.Clock().Sub(rd.at) >= o.opts.StatsEvery
			if due {
				rd.reading = true
			}
			c.mu.Unlock()
			if due {
				ctx, cancel := context.WithTimeout(context.Background(), o.opts.StatsEvery)
				o.refreshStats(ctx, g)
				cancel()
			}
		}
	}
}

// statsWatch is watchStats's state: started once, by Init; ended by Close.
type statsWatch struct {
	start, end sync.Once
	stop       chan struct{}
	wg         sync.WaitGroup
	rounds     atomic.Int64 // rounds made: the tests' way to know the ticker ticked
}

// startWatch starts watchStats, once.
func (o *Outbox) startWatch() {
	o.watch.start.Do(func() {
		o.watch.stop = make(chan struct{})
		o.watch.wg.Add(1)
		go o.watchStats()
	})
}

// stopWatch ends watchStats, if it was started, and waits for it.
func (o *Outbox) stopWatch() {
	o.watch.end.Do(func() {
		o.watch.start.Do(func() {}) // never to start after Close
		if o.watch.stop != nil {
			close(o.watch.stop)
		}
	})
	o.watch.wg.Wait()
}

// refreshStats reads group's length and oldest entry. A failure keeps the
// old reading, whose age then tells how stale it is.
func (o *Outbox) refreshStats(ctx context.Context, group int) {
	c := o.community(group)
	v, err := statsScript.Run(ctx, o.rdb, c.readingKeys()).Slice()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading.reading = false
	if err == nil {
		c.reading.set(v, o.opts.Clock())
	}
}

// readingKeys are the keys reading.lua reads: the stream, its later set
// and the later set's ages.
func (c *community) readingKeys() []string {
	return []string{c.key, c.laterKey(), c.laterAgeKey()}
}

// set takes the reply of reading.lua, {length, oldest id or Unix ms}, as
// read at now; a malformed reply changes nothing.
func (rd *reading) set(v []any, now time.Time) {
	if len(v) != 2 {
		return
	}
	n, _ := v[0].(int64)
	oldest, _ := v[1].(string)
	rd.length, rd.oldest, rd.at, rd.busy = n, time.Time{}, now, false
	if ms, err := strconv.ParseInt(strings.SplitN(oldest, "-", 2)[0], 10, 64); err == nil && oldest != "" {
		rd.oldest = time.UnixMilli(ms)
	}
}

// Redeliveries is how many entries this instance took over from others or
// recovered from lost reads.
func (o *Outbox) Redeliveries() int64 { return o.redelivs.Load() }

// Total sums the last readings of groups' outboxes (Stats of each): the
// total length, the oldest entry's age, and the age of the stalest reading
// (-1 if one was never read). It makes no Redis call.
func (o *Outbox) Total(groups ...int) Stats {
	var sum Stats
	for _, g := range groups {
		s := o.Stats(g)
		sum.Length += s.Length
		sum.Oldest = max(sum.Oldest, s.Oldest)
		if s.Age < 0 || sum.Age < 0 {
			sum.Age = -1
		} else {
			sum.Age = max(sum.Age, s.Age)
		}
	}
	return sum
}

// A Report is the outbox of some communities as /stats shows it: their
// last readings summed (see Total) and this instance's redeliveries.
type Report struct {
	// Length is the entries in the streams and the replies set aside
	// (see Later): the replies not yet accepted by VK, and those finished
	// while an older one still waits, until it is finished too (see Done).
	Length        int64       `json:"length"`
	OldestSeconds float64     `json:"oldest_seconds"` // age of the oldest of them
	Age           age.Seconds `json:"age_seconds"`    // how long ago they were read
	Redeliveries  int64       `json:"redeliveries"`   // see Redeliveries
}

// Report returns the Report of groups. It makes no Redis call.
func (o *Outbox) Report(groups ...int) Report {
	t := o.Total(groups...)
	return Report{Length: t.Length, OldestSeconds: t.Oldest.Seconds(), Age: age.Seconds(t.Age), Redeliveries: o.Redeliveries()}
}
