package bot_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/vktest"
)

// countingOutbox is an outbox that notes the size of every Take and Done,
// and holds the first Take until open is closed.
type countingOutbox struct {
	*outbox.Outbox
	open chan struct{}

	mu    sync.Mutex
	takes []int // n of each Take
	dones []int // ids of each Done
}

func (o *countingOutbox) Take(ctx context.Context, group, n int, wait time.Duration) ([]bot.Reply, error) {
	<-o.open
	o.mu.Lock()
	o.takes = append(o.takes, n)
	o.mu.Unlock()
	return o.Outbox.Take(ctx, group, n, wait)
}

func (o *countingOutbox) Done(ctx context.Context, group int, ids ...string) error {
	o.mu.Lock()
	o.dones = append(o.dones, len(ids))
	o.mu.Unlock()
	return o.Outbox.Done(ctx, group, ids...)
}

func (o *countingOutbox) counts() (takes, dones []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.takes...), append([]int(nil), o.dones...)
}

// TestReadAhead: with a ClaimAfter that allows it, a sender facing a
// backlog reads ReadAhead calls' worth at once and acknowledges them with
// one Done; every reply is sent once and leaves the outbox. Without a
// ClaimAfter it reads one call's worth at a time, as before.
func TestReadAhead(t *testing.T) {
	const n = 4 * bot.MaxBatch
	for _, tc := range []struct {
		name       string
		claimAfter time.Duration
		wantTake   int // the n of the first Take
	}{
		{"allowed", 30 * time.Second, bot.ReadAhead * bot.MaxBatch},
		{"no ClaimAfter", 0, bot.MaxBatch},
		{"ClaimAfter too short for the rate", 100 * time.Millisecond, bot.MaxBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vk := vktest.NewServer()
			t.Cleanup(vk.Close)
			opts := fastOptions()
			opts.RatePerToken = 100 // 4 calls: 40 ms, a 750th of 30 s, more than a twentieth of 100 ms
			opts.ClaimAfter = tc.claimAfter
			inner := newOutbox(t, outbox.Options{Counter: newMemCounter(), Clock: opts.Clock})
			o := &countingOutbox{Outbox: inner, open: make(chan struct{})}
			b := newBotOn(t, inner, o, vk, opts, "tok")
			for i := range n {
				if err := b.HandleMessage(context.Background(), msg(i, fmt.Sprint("text ", i))); err != nil {
					t.Fatal(err)
				}
			}
			close(o.open) // the backlog is stored: the sender reads
			sends := waitSends(t, vk, n)
			seen := map[int64]bool{}
			for _, s := range sends {
				if seen[s.RandomID] {
					t.Fatalf("random_id %d sent twice", s.RandomID)
				}
				seen[s.RandomID] = true
			}
			eventually.True(t, 5*time.Second, "every reply acknowledged", func() bool {
				l, err := inner.Len(context.Background(), 7)
				return err == nil && l == 0
			})
			takes, dones := o.counts()
			if takes[0] != tc.wantTake {
				t.Fatalf("first Take of %d replies, want %d (takes %v)", takes[0], tc.wantTake, takes)
			}
			acked := 0
			for _, d := range dones {
				acked += d
			}
			wantDones := n / (tc.wantTake / bot.MaxBatch) / bot.MaxBatch // a Done per read
			if acked != n || len(dones) > wantDones+1 {
				t.Fatalf("%d Done calls acknowledging %d replies (%v), want %d replies in at most %d calls", len(dones), acked, dones, n, wantDones+1)
			}
		})
	}
}
