package service

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/vktest"
)

// startLongPoll runs the program in long-poll mode against vk, and waits
// until it polls (events queued before a first start are not asked for).
func startLongPoll(t *testing.T, tg *redistest.Target, vk *vktest.Server, env map[string]string) *app {
	t.Helper()
	vars := map[string]string{"VK_MODE": config.ModeLongPoll, "VK_API_URL": vk.MethodURL(), "LONGPOLL_WAIT": "1s"}
	maps.Copy(vars, env)
	before := vk.LongPollSessions(testGroup)
	a := startApp(t, tg, vars)
	a.VK = vk
	if env["KEY_PREFIX"] == "" {
		// A session whose ts was read: events queued from now on come after it.
		eventually.True(t, 10*time.Second, "the program given a long-poll server", func() bool {
			return vk.LongPollSessions(testGroup) > before
		})
	}
	return a
}

// newLongPollVK starts a fake VK API whose long-poll answers carry at most
// batch events.
func newLongPollVK(t *testing.T, batch int) *vktest.Server {
	vk := vktest.NewServer()
	t.Cleanup(vk.Close)
	vk.SetLongPollBatch(batch)
	return vk
}

// queueSame queues events from..to-1 of one text for the test group.
func queueSame(vk *vktest.Server, from, to int, text string) {
	var evs []json.RawMessage
	for i := from; i < to; i++ {
		evs = append(evs, event(fmt.Sprintf("lp%d", i), 1000, i+1, text))
	}
	vk.QueueEvents(testGroup, evs...)
}

// wantSequence waits for n delivered replies and checks that they are
// 0, 1, …, n-1, each once.
func wantSequence(t *testing.T, vk *vktest.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// n messages delivered, not n sends: a send repeated with its
	// random_id (a reply whose acknowledgement a failover cut) is a send
	// VK does not deliver again.
	eventually.True(t, 30*time.Second, fmt.Sprintf("%d replies delivered", n), func() bool { return len(vk.Messages()) >= n })
	// Every queued event handled (the poller asked for the events after
	// the last one), so an unwanted extra reply is stored by now.
	if _, err := vk.WaitLongPollAcked(ctx, testGroup, vk.LongPollTS(testGroup)); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, m := range vk.Messages() {
		v, _ := strconv.Atoi(m.Message)
		got = append(got, v)
	}
	slices.Sort(got)
	if len(got) != n {
		t.Fatalf("%d replies delivered, want %d: %v", len(got), n, got)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("replies %v, want 0…%d each once", got, n-1)
		}
	}
}

func TestLongPollSeedSequence(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := newLongPollVK(t, 7)
		startLongPoll(t, tg, vk, nil)
		const n = 30
		queueSame(vk, 0, n, "hello")
		wantSequence(t, vk, n)
	})
}

func TestLongPollFailuresLoseNothing(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := newLongPollVK(t, 4)
		startLongPoll(t, tg, vk, nil)
		n := 0
		for _, code := range []int{vktest.FailedHistory, vktest.FailedKey, vktest.FailedLost} {
			queueSame(vk, n, n+6, "same")
			n += 6
			vk.FailLongPoll(testGroup, code)
		}
		queueSame(vk, n, n+6, "same")
		wantSequence(t, vk, n+6)
	})
}

func TestLongPollRestartMidStream(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := newLongPollVK(t, 3)
		a := startLongPoll(t, tg, vk, nil)
		queueSame(vk, 0, 10, "restart")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		vk.WaitSends(ctx, 4)
		if err := a.Close(); err != nil { // mid-stream: some of the ten are not handled yet
			t.Fatal(err)
		}
		queueSame(vk, 10, 20, "restart") // while nothing polls
		startLongPoll(t, tg, vk, map[string]string{"KEY_PREFIX": a.Prefix})
		wantSequence(t, vk, 20)
	})
}

func TestLongPollTwoInstancesAnswerOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := newLongPollVK(t, 5)
		a := startLongPoll(t, tg, vk, nil)
		b := startLongPoll(t, tg, vk, map[string]string{"KEY_PREFIX": a.Prefix})
		queueSame(vk, 0, 40, "twice?")
		wantSequence(t, vk, 40)
		if sends := len(vk.Sends()); sends != 40 {
			t.Errorf("%d messages.send calls for 40 messages: both instances answered", sends)
		}
		polling := 0
		for _, m := range []*app{a, b} {
			if m.longpoll.pollers.Stats()[strconv.Itoa(testGroup)].Sessions > 0 {
				polling++
			}
		}
		if polling != 1 {
			t.Errorf("%d instances polled, want 1 (the lease holder)", polling)
		}
		var scrapes string
		for _, m := range []*app{a, b} {
			scrape := m.ScrapeMetrics(t)
			scrapes += scrape
			problems, err := promlint.New(strings.NewReader(scrape)).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		}
		for _, want := range []string{"vkcounter_longpoll_polling 1", "vkcounter_longpoll_polling 0", "vkcounter_longpoll_messages_total 40"} {
			if !strings.Contains(scrapes, want) {
				t.Errorf("the instances' /metrics lack %q", want)
			}
		}
	})
}
