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
// nil: the counting script failed with OOM within oomWindow, or Redis
// reports used_memory past its maxmemory (read now, every master of a
// cluster). A PING answers in both cases, so the readiness check asks.
func (m *Main) writable(ctx context.Context) error {
	if at, recent := m.oom.Since(time.Now(), oomWindow); recent {
		return fmt.Errorf("out of memory: the counting script was refused past maxmemory (OOM) at %s", at.UTC().Format(time.RFC3339))
	}
	r, err := headroom.ReadMemory(ctx, m.rdb, 0)
	if err != nil {
		return nil // a Redis that cannot answer INFO is the PING's to report
	}
	m.memFull.Store(r.Max > 0 && r.Used > r.Max)
	if m.memFull.Load() {
		return fmt.Errorf("out of memory: %s uses %d bytes, past its maxmemory of %d: writes are refused (OOM)", r.Node, r.Used, r.Max)
	}
	return nil
}

// redisOOM reports whether the bot's Redis refuses writes, as the last
// readiness check found it (the metric vkcounter_redis_oom).
func (m *Main) redisOOM() bool {
	_, recent := m.oom.Since(time.Now(), oomWindow)
	return recent || m.memFull.Load()
}
