package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/embedredis"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// resourcePoolSize is the resource store's Redis connections (per node of
// a cluster). Each counter connection waits for one script at a time, so
// up to this many counter connections get their scripts to Redis at once,
// and Redis answers them together; go-redis's default (10 per CPU) would
// queue them.
const resourcePoolSize = 128

// openResources opens the Redis resource store on a client of its own to
// the counters' Redis, with a larger pool (resourcePoolSize); like every
// client of the service it never resends a command, and a resent acquire
// would be a second acquire.
func (m *Main) openResources(ctx context.Context) error {
	rc := m.countersRedisConfig()
	rc.PoolSize = resourcePoolSize
	var err error
	if m.resRdb, err = redisconn.Open(rc); err != nil {
		return fmt.Errorf("RESOURCE_STORE=redis: %w", err)
	}
	if m.countersEmbedded() {
		m.log.Warn().Msg("RESOURCE_STORE=redis with the embedded Redis: resource counters are shared by no other instance")
	}
	r, err := resource.NewRedis(ctx, m.resRdb, resource.RedisOptions{
		Prefix:   m.cfg.KeyPrefix,
		Interval: time.Duration(m.cfg.CounterStatsInterval) * time.Second,
		Lease:    m.cfg.ResourceLease,
		Logger:   m.log,
		Guard:    m.guard,

		MaxHoldings: m.cfg.ResourceMaxHoldings,
	})
	if err != nil {
		return fmt.Errorf("RESOURCE_STORE=redis: %w", err)
	}
	m.resources = r
	m.metrics.ObserveResourceBirth(r.RefusedUntil, r.YoungRefusals)
	if m.cfg.ResourceLease > time.Minute {
		m.log.Warn().Stringer("lease", m.cfg.ResourceLease).
			Msg("RESOURCE_LEASE over a minute: the resources held through an instance that dies stay unavailable that long")
	}
	return nil
}

// redisConfig is the service's Redis: REDIS_CLUSTER, REDIS_URL, or the
// embedded server once it runs.
func (m *Main) redisConfig() redisconn.Config {
	rc := m.cfg.Redis()
	if m.embedded != nil {
		rc.Addr = m.embedded.Addr()
	}
	return rc
}

// openRedis opens the service's Redis client, first starting the embedded
// server when neither REDIS_URL nor REDIS_CLUSTER is set.
func (m *Main) openRedis(ctx context.Context) (err error) {
	if m.cfg.RedisURL == "" && m.cfg.RedisCluster == "" {
		if m.embedded, err = embedredis.Start(); err != nil {
			return err
		}
		m.log.Warn().Msg("no REDIS_URL: using an embedded in-memory Redis; counts live only as long as this process")
	}
	if m.rdb, err = redisconn.Open(m.redisConfig()); err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	return ping(ctx, m.rdb, fmt.Sprintf("redis (%s)", m.redisKind()))
}

// ping waits up to 5 s for c's Redis to answer: one that does not answer
// at start is an error (exit 1), named by what.
func ping(ctx context.Context, c redis.UniversalClient, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// countersRedisConfig is the counters' Redis: COUNTERS_REDIS_CLUSTER,
// COUNTERS_REDIS_URL, or the service's.
func (m *Main) countersRedisConfig() redisconn.Config {
	if m.cfg.CountersOwnRedis() {
		return m.cfg.CountersRedis()
	}
	return m.redisConfig()
}

// countersEmbedded reports whether the counters' Redis is the embedded one.
func (m *Main) countersEmbedded() bool { return m.embedded != nil && !m.cfg.CountersOwnRedis() }

// openCountersRedis opens the counters' own Redis if they have one, and
// the guard that keeps the counter stores from filling theirs
// (COUNTERS_REDIS_HEADROOM), unless no store of theirs is in Redis.
func (m *Main) openCountersRedis(ctx context.Context) error {
	m.cntRdb = m.rdb
	if !m.cfg.CountersInRedis() {
		return nil
	}
	if m.cfg.CountersOwnRedis() {
		c, err := redisconn.Open(m.countersRedisConfig())
		if err != nil {
			return fmt.Errorf("COUNTERS_REDIS_URL: %w", err)
		}
		m.cntRdb, m.ownRdb = c, true // closed by Close, even if the ping fails
		if err := ping(ctx, c, "counters' redis (COUNTERS_REDIS_URL / COUNTERS_REDIS_CLUSTER)"); err != nil {
			return err
		}
	}
	if m.cfg.CountersRedisHeadroom == 0 || m.countersEmbedded() {
		return nil // the embedded Redis has no memory limit
	}
	g, err := headroom.New(m.cntRdb, headroom.Options{Percent: m.cfg.CountersRedisHeadroom, Setting: "COUNTERS_REDIS_HEADROOM"})
	if err != nil {
		return fmt.Errorf("COUNTERS_REDIS_HEADROOM: %w", err)
	}
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := g.Read(readCtx)
	switch {
	case err != nil:
		m.log.Warn().Err(err).Msg("cannot read the counters' Redis INFO memory: the headroom guard (COUNTERS_REDIS_HEADROOM) is unknown and refuses nothing, so counter clients can fill that Redis (/stats redis_memory.unknown)")
	case r.Max == 0:
		m.log.Info().Str("redis", r.Node).Msg("the counters' Redis has no maxmemory: COUNTERS_REDIS_HEADROOM refuses nothing until one is set")
	}
	m.guard = g
	return nil
}

func (m *Main) redisKind() string {
	switch {
	case m.cfg.RedisCluster != "":
		return "cluster"
	case m.cfg.RedisURL != "":
		return "server"
	}
	return "embedded"
}
