package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// vkAnswers is a token as VK sees it: what each check is answered, the
// last answer repeating, settable while the checks run.
type vkAnswers struct {
	mu      sync.Mutex
	answers []error
	asked   []time.Duration // when each check came, from the start
	start   time.Time
}

func (v *vkAnswers) set(answers ...error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.answers = answers
}

func (v *vkAnswers) check(context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, time.Since(v.start))
	err := v.answers[0]
	if len(v.answers) > 1 {
		v.answers = v.answers[1:]
	}
	return err
}

func (v *vkAnswers) checks() []time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]time.Duration(nil), v.asked...)
}

// vkError is an error as vkapi.CheckToken returns it for VK's code.
func vkError(code int) error {
	err := fmt.Errorf("groups.getTokenPermissions: %w", &api.Error{Code: api.ErrorType(code), Message: "x"})
	if code == 5 {
		return fmt.Errorf("%w: %w", vkapi.ErrTokenRefused, err)
	}
	return err
}

var noRight = fmt.Errorf("%w: it lacks the messages right (permissions mask 0)", vkapi.ErrTokenRefused)

func state(c *tokens.Checker, i int) tokens.State { return c.Status()[i].State }

// TestTransientErrorThenReady: one error 1 (VK's "unknown error"), as
// one 6 or 10 or a lost answer, is asked again with backoff: the token is
// accepted, and the service ready, within 30 s.
func TestTransientErrorThenReady(t *testing.T) {
	for _, first := range []error{vkError(1), vkError(6), vkError(10), errors.New("connection refused"), vkError(15)} {
		t.Run(first.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vk := &vkAnswers{start: time.Now()}
				vk.set(first, nil)
				c := tokens.Start([]tokens.Token{{Group: 7, Index: 0, Check: vk.check}}, tokens.Options{Required: true})
				defer c.Close()
				synctest.Wait()
				if s := c.Status()[0]; s.State != tokens.Retrying || !errors.Is(s.Err, first) {
					t.Fatalf("after %v: %v %v, want retrying", first, s.State, s.Err)
				}
				if err := c.Problem(); err == nil || !strings.Contains(err.Error(), "cannot check the token of community 7 yet") {
					t.Errorf("Problem() = %v", err)
				}
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if s := state(c, 0); s != tokens.OK || c.Problem() != nil {
					t.Fatalf("30 s after one %v: %v, problem %v; want ok (checks at %v)", first, s, c.Problem(), vk.checks())
				}
				if n := len(vk.checks()); n != 2 {
					t.Errorf("VK asked %d times, want 2 (not again once accepted)", n)
				}
				if at, last := c.Status()[0].CheckedAt, vk.checks()[1]; !at.Equal(vk.start.Add(last)) {
					t.Errorf("CheckedAt %v, want the last answer's time %v", at, vk.start.Add(last))
				}
			})
		})
	}
}

// TestBackoffGrows: while VK gives no definite answer the token is asked
// again ever less often, never more than MaxBackoff apart.
func TestBackoffGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vk := &vkAnswers{start: time.Now()}
		vk.set(vkError(10))
		c := tokens.Start([]tokens.Token{{Group: 7, Check: vk.check}}, tokens.Options{})
		defer c.Close()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		asked := vk.checks()
		if len(asked) < 8 || len(asked) > 20 {
			t.Fatalf("%d checks in 10 min: %v", len(asked), asked)
		}
		for i := 2; i < len(asked); i++ {
			if gap := asked[i] - asked[i-1]; gap > time.Minute {
				t.Errorf("check %d came %v after the one before, want at most 1m", i, gap)
			}
		}
		if first := asked[1] - asked[0]; first > 2*time.Second {
			t.Errorf("first retry after %v, want within 2s", first)
		}
	})
}

// TestRefusedTokenRecovers: a token VK refuses (error 5, or no messages
// right) is asked again every minute, so a right granted later in VK's
// settings shows at the next check, without a restart.
func TestRefusedTokenRecovers(t *testing.T) {
	for _, refusal := range []error{vkError(5), noRight} {
		t.Run(refusal.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vk := &vkAnswers{start: time.Now()}
				vk.set(refusal)
				c := tokens.Start([]tokens.Token{{Group: 7, Index: 1, Check: vk.check}, {Group: 7, Index: 0, Check: func(context.Context) error { return nil }}}, tokens.Options{Required: true})
				defer c.Close()
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				if s := c.Status()[0]; s.State != tokens.Refused || !errors.Is(s.Err, vkapi.ErrTokenRefused) {
					t.Fatalf("refused token: %v %v", s.State, s.Err)
				}
				if s := state(c, 1); s != tokens.OK {
					t.Errorf("the other token: %v, want ok (each token is checked on its own)", s)
				}
				if err := c.Problem(); err == nil || !strings.Contains(err.Error(), "community 7, token 2 of 2: VK refuses the token") {
					t.Errorf("Problem() = %v", err)
				}
				if n := len(vk.checks()); n < 5 || n > 6 {
					t.Errorf("refused token asked %d times in 5 min, want one a minute: %v", n, vk.checks())
				}
				vk.set(nil) // the right granted in VK's settings
				granted := time.Now()
				for state(c, 0) != tokens.OK {
					time.Sleep(time.Second)
					if time.Since(granted) > time.Minute+time.Second {
						t.Fatalf("still %v a minute after the right was granted", state(c, 0))
					}
				}
				if c.Problem() != nil {
					t.Errorf("Problem() = %v once accepted", c.Problem())
				}
			})
		})
	}
}

// TestNotRequired: without Required the states are reported but Problem
// says nothing; a nil Checker reports nothing.
func TestNotRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := tokens.Start([]tokens.Token{{Group: 3, Check: func(context.Context) error { return vkError(5) }}}, tokens.Options{})
		defer c.Close()
		synctest.Wait()
		if s := state(c, 0); s != tokens.Refused {
			t.Errorf("state %v, want refused", s)
		}
		if err := c.Problem(); err != nil {
			t.Errorf("Problem() = %v without Required", err)
		}
	})
	var none *tokens.Checker
	if none.Status() != nil || none.Problem() != nil {
		t.Error("a nil Checker reports something")
	}
	none.Close()
}

// TestCloseEndsAHangingCheck: Close returns while a check waits on VK.
func TestCloseEndsAHangingCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := tokens.Start([]tokens.Token{{Group: 3, Check: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}}, tokens.Options{})
		synctest.Wait()
		c.Close()
	})
}

// TestRecheck: an accepted token is not asked again until Recheck (its
// sender met a refusal), which finds it refused.
func TestRecheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vk := &vkAnswers{start: time.Now()}
		vk.set(nil)
		c := tokens.Start([]tokens.Token{{Group: 7, Index: 2, Check: vk.check}}, tokens.Options{})
		defer c.Close()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(vk.checks()); n != 1 || state(c, 0) != tokens.OK {
			t.Fatalf("accepted token asked %d times in an hour (%v), want once", n, state(c, 0))
		}
		vk.set(vkError(5))
		c.Recheck(7, 1) // another token: nothing
		synctest.Wait()
		if n := len(vk.checks()); n != 1 {
			t.Fatalf("Recheck of another token asked this one")
		}
		c.Recheck(7, 2)
		synctest.Wait()
		if state(c, 0) != tokens.Refused {
			t.Fatalf("after Recheck: %v, want refused", state(c, 0))
		}
	})
}
