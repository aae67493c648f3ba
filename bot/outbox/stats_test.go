package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// countCalls counts the commands a client sends.
type countCalls struct{ n atomic.Int64 }

func (c *countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestStatsWhileNoSenderReads: a sender that took a reply and keeps
// retrying VK reads nothing more, yet the outbox's figures follow the
// replies piling up behind it (its own watch reads them every
// StatsEvery), and an empty, idle outbox costs no Redis call.
func TestStatsWhileNoSenderReads(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		calls := &countCalls{}
		rdb := redis.NewClient(&redis.Options{Addr: tg.Addr, MaxRetries: -1})
		defer rdb.Close()
		rdb.AddHook(calls)
		const every = 20 * time.Millisecond
		o := outbox.New(rdb, outbox.Options{Prefix: redistest.Prefix(t), Consumer: "a", StatsEvery: every})
		defer o.Close()
		if err := o.Init(ctx, group); err != nil {
			t.Fatal(err)
		}
		before, rounds := calls.n.Load(), o.WatchRounds()
		eventually.True(t, 10*time.Second, "20 rounds of the watch", func() bool { return o.WatchRounds() >= rounds+20 })
		if n := calls.n.Load() - before; n != 0 {
			t.Errorf("an empty, idle outbox: %d Redis calls in 20 × StatsEvery, want 0", n)
		}

		if err := o.Add(ctx, reply(1)); err != nil {
			t.Fatal(err)
		}
		if got, err := o.Take(ctx, group, 1, 0); err != nil || len(got) != 1 {
			t.Fatalf("Take = %v, %v", got, err)
		}
		// The sender now retries VK with its one reply: no Take, no Done.
		for i := 2; i <= 6; i++ {
			if err := o.Add(ctx, reply(i)); err != nil {
				t.Fatal(err)
			}
		}
		eventually.NoError(t, 5*time.Second, "the watch sees the replies waiting", func() error {
			if st := o.Stats(group); st.Length != 6 {
				return fmt.Errorf("Stats = %+v while the sender is stuck, want the 6 replies waiting", st)
			}
			return nil
		})
		st := o.Stats(group)
		eventually.NoError(t, 5*time.Second, "the oldest reply's age grows", func() error {
			if st2 := o.Stats(group); st2.Oldest <= st.Oldest || st2.Age > time.Second {
				return fmt.Errorf("Stats %+v then %+v: the oldest reply's age must grow, the reading stay fresh", st, st2)
			}
			return nil
		})
	}, redistest.Mini, redistest.Real)
}
