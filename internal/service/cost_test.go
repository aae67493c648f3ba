package service

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
	"github.com/vkcounter/vkcounter/internal/together"
)

// The Redis commands the service sends, as documented in BENCHMARKS.md: a
// command-priced plan bills each command the client sends, a pipeline's
// commands each.
const (
	// maxCommandsPerMessage bounds the commands one message costs,
	// amortised over a burst: the count and the reply's store, the
	// sender's reads and acknowledgements, the activity counters.
	maxCommandsPerMessage = 1.5
	// maxIdleCommandsPerMinute bounds what an idle service sends with one
	// community and one token (0.2 per second).
	maxIdleCommandsPerMinute = 12
)

// commandCounter is a go-redis hook counting the commands a client sends,
// by name.
type commandCounter struct {
	mu    sync.Mutex
	names map[string]int
	total int
}

func newCommandCounter() *commandCounter { return &commandCounter{names: map[string]int{}} }

func (c *commandCounter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.names[cmd.Name()]++
		c.total++
	}
}

// snapshot returns the total and the counts by name, and starts again.
func (c *commandCounter) snapshot() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total, names := c.total, c.names
	c.total, c.names = 0, map[string]int{}
	return total, names
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*commandCounter)(nil)

// TestRedisCommandsPerMessage counts, with a hook on the service's Redis
// client, the commands a burst of messages costs each; more than the
// documented figure fails.
func TestRedisCommandsPerMessage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) { burstCommands(t, tg) }, redistest.Mini)
}

// TestRedisCommandsIdleSoak counts, after the burst of
// TestRedisCommandsPerMessage, the commands of one minute of idleness;
// more than the documented figure fails. A soak: the idleness is a
// wall-clock minute of the running service's own timers (senders,
// readiness), not a wait for a condition.
func TestRedisCommandsIdleSoak(t *testing.T) {
	soak.Test(t)
	t.Parallel() // mostly waits (an idle minute): alongside the other waiting soaks
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		counter := burstCommands(t, tg)
		time.Sleep(time.Minute)
		idle, names := counter.snapshot()
		t.Logf("one idle minute: %d commands: %v", idle, names)
		if idle > maxIdleCommandsPerMinute {
			t.Errorf("%d Redis commands in an idle minute, documented at most %d: %v", idle, maxIdleCommandsPerMinute, names)
		}
	}, redistest.Mini)
}

// burstCommands starts the service on tg with a command counter on its
// Redis clients, posts a burst of messages, checks the commands they cost
// each, and returns the counter, started again once the service is quiet.
func burstCommands(t *testing.T, tg *redistest.Target) *commandCounter {
	t.Helper()
	a := startApp(t, tg, map[string]string{"WEBHOOK_TIMEOUT": "30s"}) // a slow (race-detector) run must not see 503s
	counter := newCommandCounter()
	a.Main.redis.rdb.AddHook(counter)
	a.Main.bot.outbox.AddHook(counter) // the senders' waiting reads, on connections of their own
	a.MustOK(t, event("warm", 900, 1, "warm-up"))
	a.WaitSends(t, 1)
	a.waitQuiet(t, 1)
	counter.snapshot()

	const workers, each = 25, 20
	const n = workers * each
	together.Run(t, workers, func(w int) (struct{}, error) {
		for j := range each {
			i := w*each + j
			if code, got, _ := a.Post(t, event(fmt.Sprintf("cost%d", i), 10000+i, 1, fmt.Sprintf("text %d", i%50)), nil); code != 200 || got != "ok" {
				return struct{}{}, fmt.Errorf("answered %d %q", code, got)
			}
		}
		return struct{}{}, nil
	})
	a.WaitSends(t, n+1)
	a.waitQuiet(t, n+1) // the last acknowledgements and the activity batch
	total, names := counter.snapshot()
	perMessage := float64(total) / n
	t.Logf("%d messages: %d commands, %.2f per message: %v", n, total, perMessage, names)
	if perMessage > maxCommandsPerMessage {
		t.Errorf("%.2f Redis commands per message, documented at most %v: %v", perMessage, maxCommandsPerMessage, names)
	}
	return counter
}
