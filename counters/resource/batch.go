package resource

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Batching: the scripts of many connections are sent to Redis together.
const (
	// batchers is how many pipelines may be in flight at once.
	batchers = 4
	// maxBatch is the most scripts sent in one pipeline.
	maxBatch = 128
	// batchTimeout bounds one pipeline; each caller also stops waiting at
	// its own deadline.
	batchTimeout = 10 * time.Second
)

// A call is one script run waiting for a batch.
type call struct {
	ctx    context.Context // the caller's: a call whose caller gave up is not sent
	script *redis.Script
	keys   []string
	args   []any
	done   chan *redis.Cmd // receives the reply; buffered
}

// run runs script through the batchers and returns its reply, or an error
// when ctx ends first (the script may then still run: its outcome is
// unknown, as for any call that gets no answer).
//
// Batching is what lets one instance keep up with Redis: every connection
// of the counter port waits for one script at a time, and the batchers
// send whatever scripts wait, from all connections, in one pipeline, so
// Redis reads and answers them in one go instead of one system call each.
// Scripts of one connection stay in order: a connection sends the next
// only after the previous answered.
func (r *Redis) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan *redis.Cmd, 1)}
	select {
	case r.calls <- c:
	case <-ctx.Done():
		return failedCmd(ctx, ctx.Err())
	case <-r.stop:
		return failedCmd(ctx, ErrClosed)
	}
	select {
	case cmd := <-c.done:
		return cmd
	case <-ctx.Done():
		return failedCmd(ctx, ctx.Err())
	case <-r.stop:
		// Close does not wait for the batch this call may be in.
		return failedCmd(ctx, ErrClosed)
	}
}

// append adds c to calls, unless its caller has given up (its context
// ended while it waited for a batcher): a call not sent has a known
// outcome, nothing done, where one sent late could acquire for a holder
// whose owner has already been told it failed.
func (c call) append(calls []call) []call {
	if err := c.ctx.Err(); err != nil {
		c.done <- failedCmd(c.ctx, err)
		return calls
	}
	return append(calls, c)
}

func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// batch sends the waiting scripts until Close.
func (r *Redis) batch() {
	defer r.wg.Done()
	calls := make([]call, 0, maxBatch)
	for {
		calls = calls[:0]
		select {
		case <-r.stop:
			return
		case c := <-r.calls:
			calls = c.append(calls)
		}
	more:
		for len(calls) < maxBatch {
			select {
			case c := <-r.calls:
				calls = c.append(calls)
			default:
				break more
			}
		}
		if len(calls) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		redisconn.RunEach(ctx, r.rdb, len(calls), func(i int) (*redis.Script, []string, []any) {
			return calls[i].script, calls[i].keys, calls[i].args
		}, func(i int, cmd *redis.Cmd) { calls[i].done <- cmd })
		cancel()
	}
}
