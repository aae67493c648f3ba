package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestShutdownWithRedisDown: SIGTERM while VK refuses every send and then
// Redis stops answering. Close keeps to SHUTDOWN_TIMEOUT, and what it says
// of the replies left is what it knows: the outbox's length as last read
// and how long ago, never a made-up count (it logged "replies_left":-1).
func TestShutdownWithRedisDown(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	proxy, url := viaProxy(t, tg)
	var log syncbuf.Buffer
	const timeout = 2 * time.Second
	a := startAppLog(t, tg, env("SHUTDOWN_TIMEOUT", timeout.String(), "REDIS_URL", url, "LOG_LEVEL", "info"), &log)
	a.vk.FailAlways(10)
	for i := range 3 {
		a.mustOK(t, event(fmt.Sprintf("down%d", i), 900+i, 1, "redis goes down"))
	}
	eventually.True(t, 20*time.Second, "the senders read the outbox's length", func() bool {
		return a.outbox.Stats(testGroup).Length == 3
	})
	proxy.Stall()
	defer proxy.Resume()
	start := time.Now()
	err := a.Close()
	took := time.Since(start)
	t.Logf("Close with Redis stalled: %v, %v", took, err)
	if err != nil {
		t.Errorf("Close = %v, want nil: the replies wait in Redis", err)
	}
	if strings.Contains(log.String(), `"replies_left":-1`) {
		t.Errorf("a made-up count of replies left:\n%s", log.String())
	}
	if !strings.Contains(log.String(), `"outbox_length_last_read":3`) {
		t.Errorf("no line with the outbox's last known length; log:\n%s", log.String())
	}
	if took > timeout+500*time.Millisecond {
		t.Errorf("Close took %v with SHUTDOWN_TIMEOUT %v", took, timeout)
	}
}
