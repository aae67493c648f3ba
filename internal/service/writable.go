package service

import (
	"context"
	"fmt"
	"time"

	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// refusedWindow is how long after Redis last refused the counting script
// while answering (out of memory, request quota, read-only:
// redisconn.WriteRefusals) the service stays unready (unless used_memory
// says so longer).
const refusedWindow = 10 * time.Second

// writable returns why the bot's Redis cannot take the count's writes, or
// nil, and the cause (of redisconn.WriteRefusals): the counting script was
// refused within refusedWindow, or the last readMemory found used_memory
// past maxmemory. It sends no command (the status page's views ask it
// too); a PING answers in these cases, so the readiness check asks.
func (m *Main) writable() (cause string, err error) {
	if cause, err, at, recent := m.redis.writes.Since(time.Now(), refusedWindow); recent {
		return cause, fmt.Errorf("%s: the counting script was refused at %s (%v)", redisconn.WriteRefusals[cause], at.UTC().Format(time.RFC3339), err)
	}
	if r := m.redis.memRead.Load(); r != nil && r.Max > 0 && r.Used > r.Max {
		return redisconn.CauseOOM, fmt.Errorf("%s: %s uses %d bytes, past its maxmemory of %d: writes are refused (OOM)",
			redisconn.WriteRefusals[redisconn.CauseOOM], r.Node, r.Used, r.Max)
	}
	return "", nil
}

// readMemory reads used_memory and maxmemory of the bot's Redis now
// (every master of a cluster, keeping the fullest) for writable: /readyz
// does, before its checks. A Redis that cannot answer INFO keeps the last
// reading (the PING reports it).
func (m *Main) readMemory(ctx context.Context) {
	if r, err := headroom.ReadMemory(ctx, m.redis.rdb, 0); err == nil {
		m.redis.memRead.Store(r)
	}
}

// refusingWrites returns the cause for which the bot's Redis refuses
// writes, as writable finds it, or "" (the metrics vkcounter_redis_oom and
// vkcounter_redis_refusing_writes).
func (m *Main) refusingWrites() string {
	cause, _ := m.writable()
	return cause
}
