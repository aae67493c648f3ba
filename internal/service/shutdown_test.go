package service

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestShutdownWithRedisDown: SIGTERM while VK refuses every send and then
// Redis stops answering. Close keeps to SHUTDOWN_TIMEOUT, and says that the
// number of replies left is unknown, never a made-up count (it logged
// "replies_left":-1, a second after the deadline).
func TestShutdownWithRedisDown(t *testing.T) {
	t.Parallel() // mostly waits (its shutdown's deadline): alongside the other waiting tests
	tg := redistest.Open(t, redistest.Mini)
	proxy, url := viaProxy(t, tg)
	var log syncbuf.Buffer
	const timeout = 2 * time.Second
	a := startAppLog(t, tg, env("SHUTDOWN_TIMEOUT", timeout.String(), "REDIS_URL", url, "LOG_LEVEL", "info"), &log)
	a.VK.FailAlways(10)
	for i := range 3 {
		a.MustOK(t, event(fmt.Sprintf("down%d", i), 900+i, 1, "redis goes down"))
	}
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
	if !strings.Contains(log.String(), "how many is unknown (Redis did not answer within the shutdown)") {
		t.Errorf("no line saying the number of replies left is unknown; log:\n%s", log.String())
	}
	if took > timeout+500*time.Millisecond {
		t.Errorf("Close took %v with SHUTDOWN_TIMEOUT %v", took, timeout)
	}
}

// TestLostWithEmbedded: the shutdown error for the replies lost with the
// embedded Redis counts them, its noun agreeing, and wraps the cause.
func TestLostWithEmbedded(t *testing.T) {
	cause := errors.New("not drained")
	for _, tc := range []struct {
		left int64
		want string
	}{
		{1, "1 reply not sent before SHUTDOWN_TIMEOUT is lost with the embedded Redis: not drained"},
		{3, "3 replies not sent before SHUTDOWN_TIMEOUT are lost with the embedded Redis: not drained"},
		{-1, "the replies not sent before SHUTDOWN_TIMEOUT are lost with the embedded Redis: not drained"},
	} {
		if err := lostWithEmbedded(tc.left, cause); err.Error() != tc.want || !errors.Is(err, cause) {
			t.Errorf("%d left: %q, want %q wrapping the cause", tc.left, err, tc.want)
		}
	}
}
