package service

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vkcounter/vkcounter/internal/redischeck"
)

// evictionWatch is what the service knows of its Redis evicting keys: the
// maxmemory-policy read at start, and the keys evicted since, read with
// the readiness check's memory reading (readEvictions). Where the policy
// keeps every key, nothing is read after start.
type evictionWatch struct {
	evicting []redischeck.Evicting // the servers whose policy may evict, read at start
	base     int64                 // evicted_keys at start; -1: not read
	since    atomic.Int64          // evicted since start, at the last reading
}

// evictionConsequence is what an evicted key costs the service.
const evictionConsequence = "an evicted dedupe key or once-hash counts a retried message twice and sends a second reply, an evicted outbox loses the replies it queued"

// warnEviction reads the bot's Redis's maxmemory-policy (CONFIG GET, or
// INFO memory where CONFIG is refused) and warns, naming the policy and
// the consequence, when it may evict keys, or when neither could be read;
// it registers the metrics vkcounter_redis_eviction_policy and
// vkcounter_redis_evicted_keys. An evicting server's evicted_keys is read
// now, so that readiness fails once it grows.
func (m *Main) warnEviction(ctx context.Context) {
	if m.redis.embedded != nil {
		return // the embedded Redis has no memory limit
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	evicting, err := redischeck.Eviction(ctx, m.redis.rdb)
	policy := redischeck.SafePolicy
	for _, e := range evicting {
		m.log.Warn().Str("redis", e.Addr).Str("maxmemory_policy", e.Policy).Msgf("Redis may evict keys (maxmemory-policy %s): %s; set maxmemory-policy %s", e.Policy, evictionConsequence, redischeck.SafePolicy)
		policy = e.Policy
	}
	if err != nil {
		policy = "unknown"
		m.log.Warn().Err(err).Msgf("cannot read Redis's maxmemory-policy (CONFIG GET and INFO refused): make sure it is %s; under any other, %s", redischeck.SafePolicy, evictionConsequence)
	}
	m.redis.evictions.evicting, m.redis.evictions.base = evicting, -1
	if len(evicting) > 0 {
		if n, err := redischeck.Evicted(ctx, m.redis.rdb); err == nil {
			m.redis.evictions.base = n
		}
	}
	m.metrics.ObserveRedisEviction(policy, func() float64 { return float64(m.redis.evictions.since.Load()) })
}

// readEvictions reads how many keys an evicting Redis has evicted since
// start, for evicted: /readyz does, with readMemory. It sends nothing when
// the policy keeps every key (or evicted_keys could not be read at start).
func (m *Main) readEvictions(ctx context.Context) {
	if m.redis.evictions.base < 0 || len(m.redis.evictions.evicting) == 0 {
		return
	}
	if n, err := redischeck.Evicted(ctx, m.redis.rdb); err == nil {
		m.redis.evictions.since.Store(n - m.redis.evictions.base)
	}
}

// evicted returns why the service is not ready because Redis evicted keys
// since it started, or nil. It sends no command.
func (m *Main) evicted() error {
	n := m.redis.evictions.since.Load()
	if n <= 0 {
		return nil
	}
	var policies []string
	for _, e := range m.redis.evictions.evicting {
		policies = append(policies, e.Addr+" "+e.Policy)
	}
	return fmt.Errorf("evicted %d keys since the service started (maxmemory-policy: %s): %s; set maxmemory-policy %s and restart the service",
		n, strings.Join(policies, ", "), evictionConsequence, redischeck.SafePolicy)
}
