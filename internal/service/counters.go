package service

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// countersPart is the counters' side: their Redis (their own, or the bot's
// borrowed), the headroom guard and the stores of COUNTERS_STORE.
type countersPart struct {
	// cntRdb is the counters' Redis (COUNTERS_REDIS_URL or _CLUSTER, then
	// ownRdb), or the bot's when they share it; guard keeps the counter
	// stores from filling it (nil: COUNTERS_REDIS_HEADROOM=0, or the
	// embedded Redis).
	cntRdb   redis.UniversalClient
	ownRdb   bool
	guard    *headroom.Guard
	keyCap   *participant.KeyCap // COUNTERS_PARTICIPANT_MAX_KEYS
	stores   counters.Stores     // access, participant, window and unique counters (COUNTERS_STORE)
	activity counters.Activity   // the bot's activity counters: stores, without the guard
}

// close closes the counters' own Redis client.
func (p *countersPart) close(context.Context) error {
	if p.ownRdb {
		p.cntRdb.Close()
	}
	return nil
}

// openCounters opens the counters' side (countersPart): their Redis and
// its guard (openCountersRedis), then the stores of COUNTERS_STORE.
func (m *Main) openCounters(ctx context.Context) (err error) {
	m.counters = &countersPart{}
	m.opened(m.counters)
	if err := m.openCountersRedis(ctx); err != nil {
		return err
	}
	m.counters.keyCap = &participant.KeyCap{Max: m.cfg.CountersMaxKeys, Setting: "COUNTERS_PARTICIPANT_MAX_KEYS"}
	m.counters.stores, m.counters.activity, err = counters.OpenStores(counters.StoreOptions{Kind: m.cfg.CountersStore, Redis: m.counters.cntRdb,
		Prefix: m.cfg.KeyPrefix, Embedded: m.countersEmbedded(), Guard: m.counters.guard, Dir: m.cfg.CountersDir, FileLevels: m.cfg.CountersFileLevels,
		Timeout: m.cfg.CountersTimeout, Memory: memcap.Limits{MaxNames: m.cfg.CountersMemoryMaxNames, MaxBytes: m.cfg.CountersMemoryMaxBytes},
		MaxKeys: m.counters.keyCap})
	return err
}

// openCountersRedis opens the counters' own Redis if they have one, and
// the guard that keeps the counter stores from filling theirs
// (COUNTERS_REDIS_HEADROOM), unless no store of theirs is in Redis.
func (m *Main) openCountersRedis(ctx context.Context) error {
	m.counters.cntRdb = m.redis.rdb
	if !m.cfg.CountersInRedis() {
		return nil
	}
	if m.cfg.CountersOwnRedis() {
		c, err := redisconn.Open(m.countersRedisConfig())
		if err != nil {
			return fmt.Errorf("COUNTERS_REDIS_URL: %w", err)
		}
		m.counters.cntRdb, m.counters.ownRdb = c, true // closed by Close, even if the ping fails
		if err := ping(ctx, c, "counters' redis (COUNTERS_REDIS_URL / COUNTERS_REDIS_CLUSTER)"); err != nil {
			return err
		}
	}
	if m.cfg.CountersRedisHeadroom == 0 || m.countersEmbedded() {
		return nil // the embedded Redis has no memory limit
	}
	g, err := headroom.New(m.counters.cntRdb, headroom.Options{Percent: m.cfg.CountersRedisHeadroom, Setting: "COUNTERS_REDIS_HEADROOM"})
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
	m.counters.guard = g
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
func (m *Main) countersEmbedded() bool { return m.redis.embedded != nil && !m.cfg.CountersOwnRedis() }
