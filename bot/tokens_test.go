package bot_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

// TestCheckTokenClasses: VKSender.CheckToken, against the fake VK, calls
// only error 5 and a mask without the messages right a refusal, and
// reports every check to OnCall as the other VK calls are.
func TestCheckTokenClasses(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	closed := "http://" + tcptest.FreeAddr(t) + "/method/"
	for _, c := range []struct {
		name    string
		url     string
		fail    int
		mask    int // -1: the fake's default
		refused bool
		result  string
	}{
		{"accepted", vk.MethodURL(), 0, -1, false, "0"},
		{"error 5", vk.MethodURL(), 5, -1, true, "5"},
		{"no messages right", vk.MethodURL(), 0, 262144, true, "0"},
		{"error 1", vk.MethodURL(), 1, -1, false, "1"},
		{"error 6", vk.MethodURL(), 6, -1, false, "6"},
		{"error 10", vk.MethodURL(), 10, -1, false, "10"},
		{"an unknown error", vk.MethodURL(), 27, -1, false, "27"},
		{"VK unreachable", closed, 0, -1, false, "transport"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vk.FailAlways(c.fail)
			defer vk.FailAlways(0)
			tok := "tok-" + c.name
			if c.mask >= 0 {
				vk.SetTokenMask(tok, c.mask)
			}
			var method, result string
			s := bot.NewVKSender(tok, bot.VKOptions{MethodURL: c.url, Timeout: 2 * time.Second,
				OnCall: func(m, r string, _ time.Duration) { method, result = m, r }})
			err := s.CheckToken(context.Background())
			if got := errors.Is(err, vkapi.ErrTokenRefused); got != c.refused || (err == nil) != (c.name == "accepted") {
				t.Errorf("CheckToken() = %v, refused %v; want refused %v", err, got, c.refused)
			}
			if method != "groups.getTokenPermissions" || result != c.result {
				t.Errorf("OnCall(%q, %q), want groups.getTokenPermissions, %q", method, result, c.result)
			}
		})
	}
}

// TestBotTokens: the bot checks each token of a VK sender (Options.Tokens)
// and reports its state; with Required it is not ready while one is
// refused, and ready once VK accepts it.
func TestBotTokens(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.SetTokenMask("bad", 0)
	opts := fastOptions()
	opts.Tokens = &tokens.Options{Required: true, Recheck: 20 * time.Millisecond}
	b, _ := newBotOutbox(t, newMemCounter(), vk, opts, "good", "bad")
	eventually.NoError(t, 5*time.Second, "one token ok, one refused", func() error {
		if ts := b.Tokens(); len(ts) != 2 || ts[0].State != tokens.OK || ts[1].State != tokens.Refused {
			return fmt.Errorf("tokens %+v, want ok and refused", ts)
		}
		return nil
	})
	if err := b.Ready(); err == nil || !errors.Is(err, vkapi.ErrTokenRefused) {
		t.Errorf("Ready() = %v with a refused token", err)
	}
	vk.SetTokenMask("bad", 4096) // the right granted in VK's settings
	eventually.NoError(t, 5*time.Second, "ready once the right is granted", b.Ready)
	if ts := b.Tokens(); ts[1].State != tokens.OK {
		t.Errorf("token 2: %v once its right is granted", ts[1].State)
	}
}
