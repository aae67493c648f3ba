package client_test

import (
	"context"
	"testing"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/counterstest"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock = counterstest.Clock

func newFakeClock(sec int64) *fakeClock { return counterstest.NewClock(sec) }

func ctx(t testing.TB) context.Context { return counterstest.Context(t) }

func newServer(t testing.TB, opts counters.ServerOptions) *counters.Server {
	return counterstest.NewServer(t, opts)
}

func listen(t testing.TB, s *counters.Server) string { return counterstest.Listen(t, s) }

func dialClient(t testing.TB, addr string) *client.Client { return counterstest.Dial(t, addr) }

func statsMap(s *counters.Server) map[string]string { return counterstest.Stats(s) }

func dumpAll(t testing.TB, c *client.Client) []wire.DumpEntry { return counterstest.Dump(t, c) }

// day is a time in whole days, for the window counters' tests.
const day = 20000 * 86400
const testTimeout = counterstest.Timeout
