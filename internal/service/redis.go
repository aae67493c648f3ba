package service

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/embedredis"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// redisPart is the bot's Redis: the embedded one, or a client of REDIS_URL
// or REDIS_CLUSTER (redis.go opens it).
type redisPart struct {
	embedded *embedredis.Server // when no REDIS_URL / REDIS_CLUSTER
	rdb      redis.UniversalClient
	// writes sees the counting script refused while Redis answers (out of
	// memory, request quota, read-only); memRead is the
	// last readiness check's reading of the bot's Redis (writable.go).
	writes  redisconn.WriteWatch
	memRead atomic.Pointer[headroom.Reading]
	// serverRead is when readServer last read memRead and the evictions
	// (Unix nanoseconds; 0: never).
	serverRead atomic.Int64
	// evictions is the bot's Redis's eviction policy and the keys it
	// evicted since start (eviction.go).
	evictions evictionWatch
}

func (p *redisPart) close(context.Context) error {
	if p.rdb != nil {
		p.rdb.Close()
	}
	if p.embedded != nil {
		p.embedded.Close()
	}
	return nil
}

// redisConfig is the service's Redis: REDIS_CLUSTER, REDIS_URL, or the
// embedded server once it runs.
func (m *Main) redisConfig() redisconn.Config {
	rc := m.cfg.Redis()
	if m.redis.embedded != nil {
		rc.Addr = m.redis.embedded.Addr()
	}
	return rc
}

// openRedis opens the bot's Redis (redisPart): its client, first starting the embedded
// server when neither REDIS_URL nor REDIS_CLUSTER is set.
func (m *Main) openRedis(ctx context.Context) (err error) {
	m.redis = &redisPart{}
	m.opened(m.redis)
	if m.cfg.RedisURL == "" && m.cfg.RedisCluster == "" {
		if m.redis.embedded, err = embedredis.Start(); err != nil {
			return err
		}
		m.log.Warn().Msg("no REDIS_URL: using an embedded in-memory Redis; counts live only as long as this process")
	}
	if m.redis.rdb, err = redisconn.Open(m.redisConfig()); err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	return ping(ctx, m.redis.rdb, fmt.Sprintf("redis (%s)", m.redisKind()))
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

func (m *Main) redisKind() string {
	switch {
	case m.cfg.RedisCluster != "":
		return "cluster"
	case m.cfg.RedisURL != "":
		return "server"
	}
	return "embedded"
}
