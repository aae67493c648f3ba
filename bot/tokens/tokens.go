// Package tokens keeps what VK last said of each community token: it asks
// VK about each one on its own (groups.getTokenPermissions, through a
// check function), asks again with backoff while VK gives no definite
// answer, and asks a refused token again every minute, so that a right
// granted later in VK's settings shows without a restart. Status is the
// one source of the tokens' states for readiness, /stats and /metrics.
package tokens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// A State is what is known of a token.
type State int

// The states of a token, in the order of their gravity.
const (
	// OK: VK accepts the token and it has the messages right.
	OK State = iota
	// Retrying: VK gave no definite answer yet (unreachable, overloaded,
	// an error that says nothing of the token): it is asked again with
	// backoff.
	Retrying
	// Halted: the sender stopped sending through the token for a while,
	// after VK refused a send with it (see bot.Halt).
	Halted
	// Refused: VK refuses the token (error 5) or it lacks the messages
	// right; it is asked again every Options.Recheck.
	Refused
)

var stateNames = [...]string{OK: "ok", Retrying: "retrying", Halted: "halted", Refused: "refused"}

// String names the state, for /stats and metric labels.
func (s State) String() string { return stateNames[s] }

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// States lists every state, for metric labels that must exist from the
// first scrape.
func States() []State { return []State{OK, Retrying, Halted, Refused} }

// A Token is one community token to check.
type Token struct {
	Group int
	// Index is the token's position in the community's list, from 0.
	Index int
	// Check asks VK about the token: nil when it may send replies, an
	// error wrapping vkapi.ErrTokenRefused when VK refuses it for sure
	// (vkapi.CheckToken's errors), any other error when VK gave no
	// definite answer.
	Check func(ctx context.Context) error
}

// Options configure a Checker. Zero fields mean the defaults.
type Options struct {
	// Backoff is the first wait before asking again after an answer that
	// says nothing of the token (default 2s); it doubles up to MaxBackoff
	// (default 1m), with jitter.
	Backoff, MaxBackoff time.Duration
	// Recheck is how often a refused token is asked again (default 1m).
	Recheck time.Duration
	// Timeout bounds one check (default 30s).
	Timeout time.Duration
	// Required makes Problem report every token not yet accepted
	// (REQUIRE_VK_TOKEN); otherwise the states are information only.
	Required bool
	Logger   zerolog.Logger
}

func (o *Options) setDefaults() {
	if o.Backoff <= 0 {
		o.Backoff = 2 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Recheck <= 0 {
		o.Recheck = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
}

// A Status is one token's state and the answer that set it.
type Status struct {
	Group int
	// Index is the token's position in the community's list, from 0.
	Index int
	State State
	// Err is VK's last answer that was not an acceptance (nil when OK).
	Err error
	// Checks is how many times VK was asked about the token.
	Checks int64
	// CheckedAt is when VK last answered a check (zero before the first).
	CheckedAt time.Time
}

// MarshalJSON writes the status as /stats shows it, Err as its text.
func (s Status) MarshalJSON() ([]byte, error) {
	v := struct {
		Group  int    `json:"group_id"`
		Index  int    `json:"token"`
		State  State  `json:"state"`
		Error  string `json:"error,omitempty"`
		Checks int64  `json:"checks"`
		At     string `json:"checked_at,omitempty"`
	}{Group: s.Group, Index: s.Index, State: s.State, Checks: s.Checks}
	if s.Err != nil {
		v.Error = s.Err.Error()
	}
	if !s.CheckedAt.IsZero() {
		v.At = s.CheckedAt.UTC().Format(time.RFC3339)
	}
	return json.Marshal(v)
}

// Checker asks VK about tokens, each on its own goroutine, until Close.
type Checker struct {
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup
	of     map[int]int // tokens per community, for messages

	mu     sync.Mutex
	status []Status        // one per token, in the order given
	wake   []chan struct{} // per token: Recheck asks it again now
}

// Start begins checking tokens. A nil *Checker (no tokens to check) is
// valid: it reports nothing and no problem.
func Start(tokens []Token, opts Options) *Checker {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Checker{opts: opts, cancel: cancel, of: map[int]int{}, status: make([]Status, len(tokens)), wake: make([]chan struct{}, len(tokens))}
	for i, t := range tokens {
		c.of[t.Group]++
		c.status[i] = Status{Group: t.Group, Index: t.Index, State: Retrying, Err: errors.New("not checked yet")}
		c.wake[i] = make(chan struct{}, 1)
	}
	for i, t := range tokens {
		c.wg.Add(1)
		go c.run(ctx, i, t)
	}
	return c
}

// Close stops the checks and waits for them.
func (c *Checker) Close() {
	if c == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
}

// Recheck asks VK about the token of group at index again now (its sender
// met a refusal: bot.Halt), unless a check of it is under way.
func (c *Checker) Recheck(group, index int) {
	if c == nil {
		return
	}
	for i, s := range c.Status() {
		if s.Group == group && s.Index == index {
			select {
			case c.wake[i] <- struct{}{}:
			default:
			}
		}
	}
}

// run checks token t (status index i) until ctx ends: again with backoff
// while VK says nothing definite, every Recheck while VK refuses it, and
// once VK accepts it, only when Recheck asks.
func (c *Checker) run(ctx context.Context, i int, t Token) {
	defer c.wg.Done()
	log := c.opts.Logger.With().Int("group_id", t.Group).Int("token", t.Index).Logger()
	backoff := c.opts.Backoff
	for {
		cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		err := t.Check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		state, wait := OK, time.Duration(0)
		switch {
		case err == nil:
		case errors.Is(err, vkapi.ErrTokenRefused):
			state, wait = Refused, c.opts.Recheck
			backoff = c.opts.Backoff
		default:
			state, wait = Retrying, backoff/2+rand.N(backoff/2+1)
			backoff = min(2*backoff, c.opts.MaxBackoff)
		}
		if prev := c.set(i, state, err); prev != state {
			switch state {
			case OK:
				log.Info().Msg("VK accepts the token")
			case Refused:
				log.Error().Err(err).Stringer("recheck", c.opts.Recheck).Msg("VK refuses the token: replies through it wait; asked again every minute")
			default:
				log.Warn().Err(err).Msg("cannot check the token with VK yet; asking again")
			}
		}
		var after <-chan time.Time // nil once accepted: only Recheck asks again
		if state != OK {
			after = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-after:
		case <-c.wake[i]:
		}
	}
}

// set records a check's answer for status i and returns the former state.
func (c *Checker) set(i int, state State, err error) State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.status[i]
	prev := s.State
	s.State, s.Err = state, err
	s.Checks++
	s.CheckedAt = time.Now()
	return prev
}

// Status returns every token's state, in the order given to Start.
func (c *Checker) Status() []Status {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Status(nil), c.status...)
}

// Problem returns, with Options.Required, why the tokens cannot be relied
// on yet (the first token refused, else the first not yet accepted), or
// nil.
func (c *Checker) Problem() error {
	if c == nil || !c.opts.Required {
		return nil
	}
	var waiting *Status
	for _, s := range c.Status() {
		switch s.State {
		case Refused:
			return fmt.Errorf("community %d, token %d of %d: %w", s.Group, s.Index+1, c.of[s.Group], s.Err)
		case Retrying:
			if waiting == nil {
				waiting = &s
			}
		}
	}
	if waiting != nil {
		return fmt.Errorf("cannot check the token of community %d yet: %w", waiting.Group, waiting.Err)
	}
	return nil
}
