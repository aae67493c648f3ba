package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct{ sec atomic.Int64 }

func newFakeClock(sec int64) *fakeClock {
	c := &fakeClock{}
	c.sec.Store(sec)
	return c
}

func (c *fakeClock) Now() time.Time { return time.Unix(c.sec.Load(), 0) }

func ctx(t testing.TB) context.Context { return counterstest.Context(t) }

func newServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	return counterstest.NewServer(t, opts)
}

func listen(t testing.TB, s *counters.Server) string { return counterstest.Listen(t, s) }

func dialClient(t testing.TB, addr string) *client.Client { return counterstest.Dial(t, addr) }

func statsMap(s *counters.Server) map[string]string { return counterstest.Stats(s) }

func dumpAll(t testing.TB, c *client.Client) []wire.DumpEntry { return counterstest.Dump(t, c) }

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	counterstest.Eventually(t, within, what, cond)
}

// day is a time in whole days, for the window counters' tests.
const day = 20000 * 86400
const testTimeout = counterstest.Timeout
