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
	// commandsPerMessage is what a message costs by itself: the one
	// record script that counts it and queues its reply.
	commandsPerMessage = 1
	// maxCommandsPerRead bounds what each of the sender's reads costs: the
	// XREADGROUP, the acknowledging script and the pace script of each VK
	// call it makes (a batch split across calls makes two).
	maxCommandsPerRead = 4
	// maxCommandsPerFlush bounds what each write of the activity batch
	// costs: the day's users' PFADD and PFCOUNT, the messages' hits and the
	// users' visits (a burst of under 1,000 users: one call each).
	maxCommandsPerFlush = 4
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
// client, the commands a burst of messages costs: one per message, and at
// most a few per read of the sender and per write of the activity batch,
// however many messages each read or write serves. How many they serve
// depends on the machine's speed (a slow run reads the replies one or two
// at a time, and writes the activity every 100 ms of a longer burst), so
// the per-message figure the benchmarks show for a full batch (1.1–1.2,
// BENCHMARKS.md) is logged here, not asserted.
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
	a.waitQuiet(t, 1, true)
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
	a.waitQuiet(t, n+1, true) // the last acknowledgements and the activity batch
	total, names := counter.snapshot()
	reads, flushes := names["xreadgroup"], names["pfadd"]
	t.Logf("%d messages: %d commands, %.2f per message, %d sender reads, %d activity writes: %v",
		n, total, float64(total)/n, reads, flushes, names)
	// A connection's greeting (HELLO, CLIENT SETINFO) is not the messages'.
	work := total - names["hello"] - names["client"]
	if most := n*commandsPerMessage + reads*maxCommandsPerRead + flushes*maxCommandsPerFlush; work > most {
		t.Errorf("%d Redis commands for %d messages, %d sender reads and %d activity writes: documented at most %d (%d a message, %d a read, %d a write): %v",
			work, n, reads, flushes, most, commandsPerMessage, maxCommandsPerRead, maxCommandsPerFlush, names)
	}
	if reads > n || flushes > n {
		t.Errorf("%d sender reads and %d activity writes for %d messages: more than one each a message: %v", reads, flushes, n, names)
	}
	return counter
}
