package bot_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/pace"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
	"github.com/vkcounter/vkcounter/vktest"
)

// fleet starts n instances of the bot on one Redis (tg, prefix), each
// sending with token through vk, paced together (pace.Shared) at
// bot.DefaultRatePerToken.
func fleet(t *testing.T, tg *redistest.Target, prefix string, vk *vktest.Server, token string, n int, opts bot.Options) []*bot.Bot {
	t.Helper()
	c := newMemCounter()
	var bots []*bot.Bot
	for i := range n {
		p, err := pace.NewShared(tg.Client, pace.Key(prefix, token), bot.DefaultRatePerToken, opts.CaptchaProbe, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
		if err != nil {
			t.Fatal(err)
		}
		s := bot.NewVKSender(token, bot.VKOptions{MethodURL: vk.MethodURL(), Timeout: 5 * time.Second})
		b, _ := startBotGroup(t, tg, prefix, fmt.Sprint("instance-", i), c, opts, bot.Group{ID: 7, Senders: []bot.Sender{s}, Paces: []pace.Pace{p}})
		bots = append(bots, b)
	}
	return bots
}

// fleetOptions are the defaults but for quick polls.
func fleetOptions() bot.Options {
	return bot.Options{Poll: 100 * time.Millisecond, CaptchaProbe: bot.DefaultCaptchaProbe, Logger: zerolog.Nop()}
}

// maxPerSecond is the most of times in any one-second span.
func maxPerSecond(times []time.Time) int {
	most := 0
	for i, j := 0, 0; j < len(times); j++ {
		for times[j].Sub(times[i]) >= time.Second {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// TestFleetKeepsOneTokensPaceSoak: two (and three) instances on one token and
// one Redis, against a fake VK that answers 6 past 20 calls in a second of
// a token, as VK does: 4,000 messages posted across the instances are all
// delivered within 40 s, and at most 1 % of the calls are refused with 6.
// A soak: 4,000 replies at VK's pace, for two fleets, take 10-20 s of the
// machine's time (the pace's clock is Redis's).
func TestFleetKeepsOneTokensPaceSoak(t *testing.T) {
	soak.Test(t)
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n, " instances"), func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
				vk := vktest.NewServer()
				defer vk.Close()
				vk.SetRateLimit(20)
				bots := fleet(t, tg, redistest.Prefix(t), vk, "tok", n, fleetOptions())
				const messages = 4000
				start := time.Now()
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						for j := i; j < messages; j += n {
							if err := bots[i].HandleMessage(context.Background(), peerMsg(10000+j, 0)); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				eventually.True(t, 60*time.Second, "every reply delivered", func() bool { return len(vk.Messages()) >= messages })
				took := time.Since(start)
				calls, refused := len(vk.CallTimes("tok")), vk.RateRefusals("tok")
				t.Logf("%d instances: %d replies in %v, %d calls (%.1f/s), %d refused with 6, at most %d calls in one second",
					n, messages, took.Round(time.Millisecond), calls, float64(calls)/took.Seconds(), refused, maxPerSecond(vk.CallTimes("tok")))
				if took > 40*time.Second {
					t.Errorf("delivered in %v, want within 40 s", took)
				}
				if refused*100 > calls {
					t.Errorf("%d of %d calls refused with 6, want at most 1 %%", refused, calls)
				}
				if len(vk.Swallowed()) != 0 {
					t.Errorf("%d replies swallowed", len(vk.Swallowed()))
				}
				// A fleet shares a real Redis: the embedded one lives inside
				// one process, and miniredis's run of every script under one
				// lock delays a pace's answer by tens of ms under this load.
			}, redistest.Real)
		})
	}
}

// TestCaptchaPausesTheTokenForTheFleetSoak: two instances on one token; VK
// asks for a captcha on every call for 15 s. The token pauses for both,
// one probe every CaptchaProbe (5 s): at most 6 calls in those 15 s;
// every reply posted meanwhile is kept and delivered within 90 s after VK
// stops asking. A soak: the captcha lasts 15 s of the machine's time (the
// pace's clock is Redis's, which no test clock moves).
func TestCaptchaPausesTheTokenForTheFleetSoak(t *testing.T) {
	soak.Test(t)
	t.Parallel()
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.SetRateLimit(20)
		opts := fleetOptions()
		opts.CaptchaProbe = bot.DefaultCaptchaProbe
		bots := fleet(t, tg, redistest.Prefix(t), vk, "tok", 2, opts)
		vk.FailAlways(14)
		start := time.Now()
		for i := range 40 {
			if err := bots[i%2].HandleMessage(context.Background(), peerMsg(20000+i, 0)); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, 10*time.Second, "a first call", func() bool { return len(vk.CallTimes("tok")) > 0 })
		// VK asks for 15 s from the first call on.
		first := vk.CallTimes("tok")[0]
		<-time.After(time.Until(first.Add(15 * time.Second))) // the captcha's span, not a wait for an effect
		vk.FailAlways(0)
		stopped := time.Now()
		n := 0
		for _, at := range vk.CallTimes("tok") {
			if at.Before(first.Add(15 * time.Second)) {
				n++
			}
		}
		if n > 6 {
			t.Errorf("%d calls in the 15 s of captcha, want at most 6", n)
		}
		eventually.True(t, 90*time.Second, "every reply delivered", func() bool { return len(vk.Messages()) >= 40 })
		t.Logf("captcha: %d calls while VK asked; every reply delivered %v after it stopped asking (posted %v before)",
			n, time.Since(stopped).Round(time.Millisecond), stopped.Sub(start).Round(time.Millisecond))
	}, redistest.Mini, redistest.Real)
}

// startBotGroup starts a bot on tg serving g, its outbox under prefix
// with consumer.
func startBotGroup(t *testing.T, tg *redistest.Target, prefix, consumer string, c outbox.Counter, opts bot.Options, g bot.Group) (*bot.Bot, *outbox.Outbox) {
	t.Helper()
	o := outbox.New(tg.Client, outbox.Options{Prefix: prefix, Consumer: consumer, Counter: c})
	t.Cleanup(func() { o.Close() })
	if err := o.Init(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(o, o, []bot.Group{g}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	return b, o
}
