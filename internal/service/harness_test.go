package service

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// The harness of package servicetest, under the names the tests use.
const (
	testGroup  = servicetest.Group
	testSecret = servicetest.Secret
)

var (
	event         = servicetest.Event
	singleServers = servicetest.SingleServers
	env           = servicetest.WithCounterPort
)

// app is the whole service running on :0 ports for one test.
type app struct {
	*Main
	*servicetest.Env
}

// startApp runs the service as `vkcounter serve` does, against tg (nil =
// the embedded Redis) and a fresh fake VK API; env overrides the test
// defaults (servicetest.Start).
func startApp(t testing.TB, tg *redistest.Target, env map[string]string) *app {
	t.Helper()
	return startAppLog(t, tg, env, nil)
}

// startAppLog is startApp logging to log (nil: the test's log):
// warnings and errors, unless env sets LOG_LEVEL.
func startAppLog(t testing.TB, tg *redistest.Target, env map[string]string, log io.Writer) *app {
	t.Helper()
	m, e := servicetest.Start(t, tg, env, log, New)
	return &app{m, e}
}

// waitSettled waits until the outbox of the test's community is empty:
// every reply stored has been sent and acknowledged, so none is still to
// come. A test that checks that no second reply went out checks after it.
func (a *app) waitSettled(t testing.TB) {
	t.Helper()
	eventually.True(t, 20*time.Second, "every stored reply sent", func() bool {
		n, err := a.bot.outbox.Len(context.Background(), servicetest.Group)
		return err == nil && n == 0
	})
}

// waitQuiet waits, with no Redis call of its own (a test counting the
// service's commands runs it), for the work of the messages counted so far
// to be done: the outbox's last reading, taken by the acknowledgement that
// emptied it, shows it empty, and the activity batch is written — vk.messages
// as last written at least messages, and its senders visited after it; and
// when the last batch had a sender new to the day (newSender), added to the
// day's unique counter after that (the flush's last write). A batch of
// senders all added before reads the day's estimate only once a minute.
func (a *app) waitQuiet(t testing.TB, messages int64, newSender bool) {
	t.Helper()
	eventually.True(t, 20*time.Second, "the replies acknowledged and the activity written", func() bool {
		s := a.bot.outbox.Stats(servicetest.Group)
		r := a.bot.bot.ActivityReport()
		return s.Age >= 0 && s.Length == 0 && r.Messages.Total >= messages && r.Users.Today.Age >= 0 &&
			r.Users.Age <= r.Messages.Age && (!newSender || r.Users.Today.Age <= r.Users.Age)
	})
}

// mustTotal requires the access counter name's total, read on the counter
// port by a counter client (as `vkcounter cnt total` reads it), to be want.
func (a *app) mustTotal(t testing.TB, name string, want int64) {
	t.Helper()
	c := servicetest.DialCounters(t.Context(), t, a.CounterAddr())
	if err := totalIs(t, c, name, want); err != nil {
		t.Fatal(err)
	}
}

// waitTotal is mustTotal for counters the bot feeds: they are written in
// batches (ActivityFlush), so it polls until want shows up.
func (a *app) waitTotal(t testing.TB, name string, want int64) {
	t.Helper()
	c := servicetest.DialCounters(t.Context(), t, a.CounterAddr())
	eventually.NoError(t, 5*time.Second, "total "+name, func() error { return totalIs(t, c, name, want) })
}

// totalIs says how the access counter name's total, read by c, differs
// from want.
func totalIs(t testing.TB, c *client.Client, name string, want int64) error {
	if n, err := c.Total(t.Context(), name); err != nil || n != want {
		return fmt.Errorf("total %s: %d %v; want %d", name, n, err, want)
	}
	return nil
}
