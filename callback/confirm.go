package callback

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// A follower answers a community's confirmation events with the code VK
// gives now (Group.FetchConfirmation), or, when VK does not give one within
// ConfirmWait, with the last code it gave. VK changes the code from time to
// time and whenever a server's settings change, so a code fetched once
// goes stale; and VK expects the answer at once, so a slow VK must not
// hold it up.
//
// Fetches are bounded: one at a time (the events that come meanwhile wait
// for it, within their own ConfirmWait), and at most ConfirmFetchBurst in a
// row, then one per ConfirmFetchEvery; an event beyond that gets the last
// code known. A flood of confirmation events therefore costs the token at
// most one VK call per ConfirmFetchEvery. It is safe for concurrent use.
type follower struct {
	fetch   func(context.Context) (string, error)
	limiter *rate.Limiter
	stale   *ratelog.Logger // an answer with the last code known, and why

	mu       sync.Mutex    // guards the fields below
	last     string        // the last code VK gave ("" before the first)
	lastErr  error         // the last fetch's error, nil if it succeeded
	inflight chan struct{} // closed when the fetch under way ends; nil when none is
}

func newFollower(fetch func(context.Context) (string, error), known string, log zerolog.Logger) *follower {
	return &follower{fetch: fetch, last: known, stale: ratelog.New(log, FailLogEvery),
		limiter: rate.NewLimiter(rate.Every(ConfirmFetchEvery), ConfirmFetchBurst)}
}

// errNoCode: no confirmation code is known and VK gave none in time.
var errNoCode = errors.New("no confirmation code known, and VK gave none")

// code returns the code to answer a confirmation event with, within
// ConfirmWait (or ctx, if it ends sooner).
func (f *follower) code(ctx context.Context) (string, error) {
	f.mu.Lock()
	if ch := f.inflight; ch != nil {
		// Another event is asking VK: share its answer.
		f.mu.Unlock()
		wait, cancel := context.WithTimeout(ctx, ConfirmWait)
		defer cancel()
		select {
		case <-ch:
		case <-wait.Done():
		}
		return f.known(wait.Err())
	}
	if !f.limiter.Allow() {
		f.mu.Unlock()
		return f.known(errors.New("too many confirmation events: VK not asked again yet"))
	}
	ch := make(chan struct{})
	f.inflight = ch
	f.mu.Unlock()

	fctx, cancel := context.WithTimeout(ctx, ConfirmWait)
	code, err := f.fetch(fctx)
	cancel()
	if err == nil && code == "" {
		err = errors.New("VK gave an empty code")
	}
	f.mu.Lock()
	if err == nil {
		f.last = code
	}
	f.lastErr, f.inflight = err, nil
	f.mu.Unlock()
	close(ch)
	return f.known(err)
}

// known returns the last code VK gave, or, if it gave none yet, an error
// saying why. why (or, if nil, the last fetch's error) is why VK's code of
// now is not known, nil if it is: an answer with an older code is logged
// with it.
func (f *follower) known(why error) (string, error) {
	f.mu.Lock()
	last, lastErr := f.last, f.lastErr
	f.mu.Unlock()
	if why == nil {
		why = lastErr
	}
	if last == "" {
		return "", fmt.Errorf("%w: %w", errNoCode, why)
	}
	if why != nil {
		f.stale.Warn().Err(why).Msg("callback: confirmation answered with the last code VK gave, not VK's code of now")
	}
	return last, nil
}
