package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

// pollInto feeds the long-poll events of vk to the fake bot's webhook at u
// until the test ends, as a long-poll bot would: the next ts is asked for
// only once every event of an answer was answered "ok". reverse makes it
// handle each answer's events last to first.
func pollInto(t *testing.T, vk *vktest.Server, u string, reverse bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		resp, err := http.Get(vk.MethodURL() + fmt.Sprintf("groups.getLongPollServer?group_id=%d&v=5.199", group))
		if err != nil {
			t.Error(err)
			return
		}
		var s struct {
			Response struct{ Key, Server, TS string }
		}
		json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		ts := s.Response.TS
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?act=a_check&key=%s&ts=%s&wait=1", s.Response.Server, s.Response.Key, ts), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			var a struct {
				TS      string            `json:"ts"`
				Updates []json.RawMessage `json:"updates"`
			}
			json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if reverse {
				slices.Reverse(a.Updates)
			}
			for _, ev := range a.Updates {
				resp, err := http.Post(u, "application/json", bytes.NewReader(ev))
				if err != nil {
					return
				}
				resp.Body.Close()
			}
			ts = a.TS
		}
	}()
}

func longPollOptions(vk *vktest.Server) loadtest.CallbackOptions {
	o := options("", vk)
	o.LongPoll, o.Wait = true, 2*time.Second
	return o
}

func TestLongPollCorrectBotPasses(t *testing.T) {
	vk := newVK(t)
	vk.SetLongPollBatch(4)
	_, u := newFakeBot(t, vk)
	pollInto(t, vk, u, false)
	rep := run(t, longPollOptions(vk))
	if !rep.OK() || rep.Check.Checked != 30 || rep.Events != 30 {
		t.Fatalf("checked %d of %d events, problems %v %v", rep.Check.Checked, rep.Events, problems(rep), rep.Check.Listed)
	}
}

// TestLongPollCheckerCatchesReordering: a bot that handles the events of
// an answer out of order gives each text its numbers once each, but not
// in the order of the events, which a long poll fixes.
func TestLongPollCheckerCatchesReordering(t *testing.T) {
	vk := newVK(t)
	vk.SetLongPollBatch(30)
	_, u := newFakeBot(t, vk)
	pollInto(t, vk, u, true)
	o := longPollOptions(vk)
	o.Rate = 1e9 // queued all at once, so that one answer holds several events of a text
	rep := run(t, o)
	if rep.OK() || problems(rep)[loadtest.WrongNumber] == 0 {
		t.Fatalf("reordered answers passed: problems %v", problems(rep))
	}
}

func TestLongPollBotNotPolling(t *testing.T) {
	vk := newVK(t)
	o := longPollOptions(vk)
	o.Wait = 100 * time.Millisecond
	if _, err := loadtest.RunCallback(context.Background(), o); err == nil {
		t.Fatal("a run with no bot polling started")
	}
}
