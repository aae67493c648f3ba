package freq

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"
)

// prefillWorkers is how many scripts Prefill keeps in flight.
const prefillWorkers = 8

// Prefill stores n occurrences of every identity that have just left the
// window: at distinct seconds ending one second before now minus the
// window, through the counting script, so in the layout Count reads. The
// next Count of such an identity drops them and answers as if they were
// not there. It is the load tools' "expired" history (vkcounter prefill,
// loadtest -expired). It keeps prefillWorkers scripts in flight, reads
// identities as they are needed, and stops at the first error (or when ctx
// ends), which it returns. n below 1 is an error wrapping ErrInvalid, and
// writes nothing.
func (s *Store) Prefill(ctx context.Context, identities iter.Seq[string], n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d occurrences per identity, want at least 1", ErrInvalid, n)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := make(chan string)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range prefillWorkers {
		wg.Go(func() {
			for id := range ids {
				if err := s.backfill(ctx, id, n); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	var stopped error
feed:
	for id := range identities {
		select {
		case ids <- id:
		case <-ctx.Done():
			stopped = ctx.Err()
			break feed
		}
	}
	close(ids)
	wg.Wait()
	if first != nil {
		return first
	}
	return stopped
}

// backfill records n occurrences of identity at distinct seconds ending
// one second before now minus the window (see Prefill).
func (s *Store) backfill(ctx context.Context, identity string, n int) error {
	start := time.Now().Add(-s.window - time.Duration(n+1)*time.Second)
	for k := range n {
		if _, err := s.countAt(ctx, identity, "", start.Add(time.Duration(k)*time.Second)); err != nil {
			return err
		}
	}
	return nil
}
