// Package pace keeps a VK token's calls within VK's rate however many
// instances send with it: one schedule per token in Redis (Shared), or in
// the process alone (Local, for one instance or dry-run).
//
// VK allows a community token about 20 calls a second in total, whatever
// sends them. Shared hands out the token's call slots from one hash in
// Redis (pace.lua, Redis's clock): each call costs one script run, which
// answers how long to wait for the slot. An error 6 (too many requests)
// doubles the interval between slots, which recovers towards the base with
// a half-life of RecoverHalfLife; a captcha pauses the token for every
// instance, then one caller gets the probe. An instance that dies holds
// nothing: its slots pass. While Redis does not answer, the instance
// paces itself alone (Local), and says so once.
package pace

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// Margin is the share of VK_RATE left unused between slots, so that the
// jitter of calls on their way to VK (a slow scheduler, a network) does
// not put VK_RATE + 1 of them in one second: with 5 %, 20 calls take 1.05 s
// and a call may come up to 50 ms late without one too many.
const Margin = 0.05

// RecoverHalfLife is how fast the interval raised by an error 6 comes back
// towards the base: half its excess in this time.
const RecoverHalfLife = 5 * time.Second

// slowest is how far errors 6 may stretch the interval: 20 times the base
// (one call a second at VK_RATE=20).
const slowest = 20

// A Slot is what Wait answers: the call may be made now (a probe carries
// one reply), or the token is paused until Paused.
type Slot struct {
	Probe  bool      // the first call after a pause: it carries one reply
	Paused time.Time // non-zero: no call before it; ask again then
}

//go:embed pace.lua
var paceLua string

var paceScript = redis.NewScript(paceLua)

// A Pace is one token's pace. Its methods are safe for concurrent use.
type Pace interface {
	// Wait waits for the token's next call slot, or returns at once when
	// the token is paused (Slot.Paused). An error means ctx ended.
	Wait(ctx context.Context) (Slot, error)
	// Slow notes that VK refused a call for the token's pace (error 6).
	Slow(ctx context.Context)
	// Pause pauses the token for d (VK asks for a captcha): Wait then
	// answers Paused until d has passed, then gives one caller the probe.
	Pause(ctx context.Context, d time.Duration)
	// Resume ends a pause: the probe went through.
	Resume(ctx context.Context)
}

// Key returns the Redis key of token's pace under prefix: 16 hex digits
// of the token's SHA-256 name it, never the token itself.
func Key(prefix, token string) string {
	sum := sha256.Sum256([]byte(token))
	return prefix + "t:{" + hex.EncodeToString(sum[:8]) + "}:pace"
}

// Shared is a token's pace in Redis, shared by every instance.
type Shared struct {
	rdb   redis.Scripter
	key   string
	base  time.Duration
	probe time.Duration
	local *Local // while Redis does not answer
	log   zerolog.Logger
	alone atomic.Bool // the last call paced alone: logged once per stretch
}

var _ Pace = (*Shared)(nil)

// NewShared returns the pace of the token whose key is key (see Key), at
// most perSecond calls a second less Margin, the pause after a captcha
// answer being probe.
func NewShared(rdb redis.Scripter, key string, perSecond float64, probe time.Duration, log zerolog.Logger) (*Shared, error) {
	if rdb == nil || perSecond <= 0 || probe <= 0 {
		return nil, fmt.Errorf("pace: a Redis client, a positive rate and a positive probe are required")
	}
	base := time.Duration(float64(time.Second) * (1 + Margin) / perSecond)
	return &Shared{rdb: rdb, key: key, base: base, probe: probe, local: NewLocal(perSecond), log: log}, nil
}

// redisTimeout bounds each pace call: a stalled Redis must not stall the
// sends longer than that; the instance then paces alone.
const redisTimeout = time.Second

func (s *Shared) run(ctx context.Context, op string, pause time.Duration) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return paceScript.Run(ctx, s.rdb, []string{s.key}, op, s.base.Microseconds(), (slowest * s.base).Microseconds(),
		RecoverHalfLife.Microseconds(), pause.Microseconds()).Int64Slice()
}

// lateSlot is how late a call may begin after its slot: a call later
// than that (a slow answer from Redis, a busy scheduler) would bring the
// next calls closer than the margin allows, so its slot is given up and
// another taken, up to lateTries times.
const (
	lateSlot  = 25 * time.Millisecond
	lateTries = 3
)

// Wait implements Pace.
func (s *Shared) Wait(ctx context.Context) (Slot, error) {
	for try := 1; ; try++ {
		slot, late, err := s.wait(ctx)
		if err != nil || !late || try == lateTries {
			return slot, err
		}
	}
}

// wait takes one slot and waits for it; late reports that the call would
// begin more than lateSlot after it.
func (s *Shared) wait(ctx context.Context) (slot Slot, late bool, err error) {
	asked := time.Now()
	v, err := s.run(ctx, "wait", s.probe)
	if err != nil || len(v) != 2 {
		if ctx.Err() != nil {
			return Slot{}, false, ctx.Err()
		}
		if !s.alone.Swap(true) {
			s.log.Warn().Err(err).Msg("cannot read the token's pace in Redis: this instance paces the token alone meanwhile")
		}
		slot, err := s.local.Wait(ctx)
		return slot, false, err
	}
	if s.alone.Swap(false) {
		s.log.Info().Msg("the token's pace is read in Redis again")
	}
	answered := time.Now()
	wait := time.Duration(v[0]) * time.Microsecond
	if v[1] == 2 {
		return Slot{Paused: answered.Add(wait)}, false, nil
	}
	if err := sleep(ctx, wait); err != nil {
		return Slot{}, false, err
	}
	// Redis gave the slot somewhere between asked and answered: the call
	// begins at most this much after it.
	late = v[1] == 0 && time.Since(answered.Add(wait))+answered.Sub(asked) > lateSlot
	return Slot{Probe: v[1] == 1}, late, nil
}

// Slow implements Pace.
func (s *Shared) Slow(ctx context.Context) {
	s.local.Slow(ctx)
	if _, err := s.run(ctx, "slow", 0); err != nil {
		s.log.Debug().Err(err).Msg("cannot lower the token's pace in Redis")
	}
}

// Pause implements Pace.
func (s *Shared) Pause(ctx context.Context, d time.Duration) {
	s.local.Pause(ctx, d)
	if _, err := s.run(ctx, "pause", d); err != nil {
		s.log.Warn().Err(err).Msg("cannot pause the token in Redis: only this instance pauses")
	}
}

// Resume implements Pace.
func (s *Shared) Resume(ctx context.Context) {
	s.local.Resume(ctx)
	if _, err := s.run(ctx, "resume", 0); err != nil {
		s.log.Warn().Err(err).Msg("cannot end the token's pause in Redis")
	}
}

// Local is a token's pace in this process alone: a token bucket of no
// burst (golang.org/x/time/rate), halved by an error 6 and restored over
// RecoverHalfLife, with a pause of its own.
type Local struct {
	lim  *rate.Limiter
	base rate.Limit

	mu     sync.Mutex // guards the fields below
	slowAt time.Time  // when an error 6 last halved the rate
	paused time.Time  // no call before it
	probed bool       // the probe after the pause was handed out
}

var _ Pace = (*Local)(nil)

// NewLocal returns a pace of perSecond calls a second.
func NewLocal(perSecond float64) *Local {
	return &Local{lim: rate.NewLimiter(rate.Limit(perSecond), 1), base: rate.Limit(perSecond)}
}

// Wait implements Pace.
func (l *Local) Wait(ctx context.Context) (Slot, error) {
	l.mu.Lock()
	now := time.Now()
	if now.Before(l.paused) {
		until := l.paused
		l.mu.Unlock()
		return Slot{Paused: until}, nil
	}
	probe := !l.paused.IsZero() && !l.probed
	if probe {
		l.probed = true
	}
	if !l.slowAt.IsZero() { // recovering after an error 6
		lim := l.base - (l.base-l.lim.Limit())*rate.Limit(halve(now.Sub(l.slowAt)))
		l.lim.SetLimitAt(now, lim)
		l.slowAt = now
		if lim >= l.base*0.99 {
			l.lim.SetLimitAt(now, l.base)
			l.slowAt = time.Time{}
		}
	}
	l.mu.Unlock()
	return Slot{Probe: probe}, l.lim.Wait(ctx)
}

// halve is the share of an excess left after d with RecoverHalfLife.
func halve(d time.Duration) float64 {
	return math.Pow(0.5, float64(d)/float64(RecoverHalfLife))
}

// Slow implements Pace.
func (l *Local) Slow(context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.lim.SetLimitAt(now, max(l.lim.Limit()/2, l.base/slowest))
	l.slowAt = now
}

// Pause implements Pace.
func (l *Local) Pause(_ context.Context, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paused, l.probed = time.Now().Add(d), false
}

// Resume implements Pace.
func (l *Local) Resume(context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paused, l.probed = time.Time{}, false
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
