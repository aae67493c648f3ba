package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// portPart is the counter port (COUNTER_ADDR) and, with
// RESOURCE_STORE=redis, the resource store it serves.
type portPart struct {
	// resRdb is the resource store's own client (RESOURCE_STORE=redis):
	// the counters' Redis, with a larger pool.
	resRdb     redis.UniversalClient
	resources  *resource.Redis
	counterLn  net.Listener // nil when COUNTER_ADDR=off
	counterSrv *counters.Server
	serving    sync.WaitGroup
}

// close closes the counter connections, which releases everything they
// hold, then the resource store and its Redis client.
func (p *portPart) close(context.Context) error {
	var err error
	if p.counterSrv != nil {
		if cerr := p.counterSrv.Close(); cerr != nil {
			err = fmt.Errorf("counter server: %w", cerr)
		}
	} else if p.counterLn != nil {
		p.counterLn.Close()
	}
	p.serving.Wait()
	if p.resources != nil {
		p.resources.Close()
	}
	if p.resRdb != nil {
		p.resRdb.Close()
	}
	return err
}

// CounterOff is the COUNTER_ADDR value that disables the counter port.
const CounterOff = "off"

// openPort opens the counter port (portPart) unless COUNTER_ADDR=off.
func (m *Main) openPort(ctx context.Context) error {
	m.port = &portPart{}
	m.opened(m.port)
	if m.cfg.CounterAddr == CounterOff {
		return nil
	}
	var res counters.ResourceStore
	if m.cfg.ResourceStore == counters.StoreRedis {
		if err := m.openResources(ctx); err != nil {
			return err
		}
		res = counters.RedisResources(m.port.resources)
	}
	srv, err := counters.NewServer(counters.ServerOptions{
		Resources:      res,
		MaxConnections: m.counterConnLimit(openFileLimit()),
		Buckets:        m.cfg.CounterBuckets,
		MaxMemory:      m.cfg.ResourceMaxMemory,
		MaxHoldings:    m.cfg.ResourceMaxHoldings,
		StatsInterval:  time.Duration(m.cfg.CounterStatsInterval) * time.Second,
		Logger:         m.log,
		Observer:       m.metrics,
		Stores:         m.counters.stores,
	})
	if err != nil {
		return fmt.Errorf("counter server: %w", err)
	}
	ln, err := net.Listen("tcp", m.cfg.CounterAddr)
	if err != nil {
		return fmt.Errorf("COUNTER_ADDR: %w", err)
	}
	m.port.counterSrv, m.port.counterLn = srv, ln
	m.port.serving.Add(1)
	go func() {
		defer m.port.serving.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, counters.ErrServerClosed) {
			m.log.Error().Err(err).Msg("counter server stopped")
		}
	}()
	return nil
}

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
	if m.port.resRdb, err = redisconn.Open(rc); err != nil {
		return fmt.Errorf("RESOURCE_STORE=redis: %w", err)
	}
	if m.countersEmbedded() {
		m.log.Warn().Msg("RESOURCE_STORE=redis with the embedded Redis: resource counters are shared by no other instance")
	}
	r, err := resource.NewRedis(ctx, m.port.resRdb, resource.RedisOptions{
		Prefix:   m.cfg.KeyPrefix,
		Interval: time.Duration(m.cfg.CounterStatsInterval) * time.Second,
		Lease:    m.cfg.ResourceLease,
		Logger:   m.log,
		Guard:    m.counters.guard,

		MaxHoldings: m.cfg.ResourceMaxHoldings,
	})
	if err != nil {
		return fmt.Errorf("RESOURCE_STORE=redis: %w", err)
	}
	m.port.resources = r
	m.metrics.ObserveResourceBirth(r.RefusedUntil, r.YoungRefusals)
	if m.cfg.ResourceLease > time.Minute {
		m.log.Warn().Stringer("lease", m.cfg.ResourceLease).
			Msg("RESOURCE_LEASE over a minute: the resources held through an instance that dies stay unavailable that long")
	}
	return nil
}

// CounterAddr is the address of the counter port, or "off".
func (m *Main) CounterAddr() string {
	if m.port.counterLn == nil {
		return CounterOff
	}
	return m.port.counterLn.Addr().String()
}
