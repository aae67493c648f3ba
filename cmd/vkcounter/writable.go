package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vkcounter/vkcounter/internal/headroom"
)

// oomWindow is how long after the counting script last failed with OOM
// the service stays unready (unless used_memory says so longer).
const oomWindow = 10 * time.Second

// writable returns why the bot's Redis cannot take the count's writes, or
// nil: the counting script failed with OOM within oomWindow, or the last
// readMemory found used_memory past maxmemory. It sends no command (the
// status page's views ask it too); a PING answers in both cases, so the
// readiness check asks.
func (m *Main) writable() error {
	if at, recent := m.oom.Since(time.Now(), oomWindow); recent {
		return fmt.Errorf("out of memory: the counting script was refused past maxmemory (OOM) at %s", at.UTC().Format(time.RFC3339))
	}
	if r := m.memRead.Load(); r != nil && r.Max > 0 && r.Used > r.Max {
		return fmt.Errorf("out of memory: %s uses %d bytes, past its maxmemory of %d: writes are refused (OOM)", r.Node, r.Used, r.Max)
	}
	return nil
}

// readMemory reads used_memory and maxmemory of the bot's Redis now
// (every master of a cluster, keeping the fullest) for writable: /readyz
// does, before its checks. A Redis that cannot answer INFO keeps the last
// reading (the PING reports it).
func (m *Main) readMemory(ctx context.Context) {
	if r, err := headroom.ReadMemory(ctx, m.rdb, 0); err == nil {
		m.memRead.Store(r)
	}
}

// redisOOM reports whether the bot's Redis refuses writes, as the last
// readiness check found it (the metric vkcounter_redis_oom).
func (m *Main) redisOOM() bool { return m.writable() != nil }
