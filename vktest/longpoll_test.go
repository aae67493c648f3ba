package vktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/vktest"
)

// lpAnswer is an answer of the long-poll server.
type lpAnswer struct {
	TS      any               `json:"ts"`
	Updates []json.RawMessage `json:"updates"`
	Failed  int               `json:"failed"`
}

func check(t *testing.T, server, key string, ts any, wait int) lpAnswer {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s?act=a_check&key=%s&ts=%v&wait=%d", server, key, ts, wait))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a lpAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func event(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"message_new","event_id":"e%d","v":"5.199","object":{"message":{"peer_id":1,"text":"t"}},"group_id":7}`, i))
}

func TestLongPollServer(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	vk.Version = "5.199"
	s.QueueEvents(7, event(1)) // before the session: not part of it
	lp, err := vk.GroupsGetLongPollServer(api.Params{"group_id": 7})
	if err != nil {
		t.Fatal(err)
	}
	if lp.Ts != "1" || lp.Key == "" {
		t.Fatalf("getLongPollServer = %+v, want ts 1 and a key", lp)
	}
	if a := check(t, lp.Server, lp.Key, lp.Ts, 0); a.TS != "1" || len(a.Updates) != 0 || a.Failed != 0 {
		t.Fatalf("empty wait: %+v", a)
	}
	s.SetLongPollBatch(2)
	s.QueueEvents(7, event(2), event(3), event(4))
	a := check(t, lp.Server, lp.Key, lp.Ts, 1)
	if a.TS != "3" || len(a.Updates) != 2 || string(a.Updates[0]) != string(event(2)) {
		t.Fatalf("first batch: %+v", a)
	}
	if a = check(t, lp.Server, lp.Key, a.TS, 1); a.TS != "4" || len(a.Updates) != 1 {
		t.Fatalf("second batch: %+v", a)
	}

	// failed 1 gives the oldest ts the history holds; 2 and 3 expire the key.
	s.TrimLongPoll(7, 1)
	if a = check(t, lp.Server, lp.Key, 1, 0); a.Failed != 1 || a.TS != float64(3) {
		t.Fatalf("ts before the history: %+v, want failed 1 with ts 3", a)
	}
	s.FailLongPoll(7, vktest.FailedHistory, vktest.FailedKey)
	if a = check(t, lp.Server, lp.Key, 3, 0); a.Failed != 1 || a.TS != float64(3) {
		t.Fatalf("injected failed 1: %+v", a)
	}
	if a = check(t, lp.Server, lp.Key, 3, 0); a.Failed != 2 {
		t.Fatalf("injected failed 2: %+v", a)
	}
	if a = check(t, lp.Server, lp.Key, 3, 0); a.Failed != 2 {
		t.Fatalf("the expired key still works: %+v", a)
	}
	lp2, err := vk.GroupsGetLongPollServer(api.Params{"group_id": 7})
	if err != nil || lp2.Key == lp.Key || lp2.Ts != "4" {
		t.Fatalf("new session %+v, %v: want a new key and ts 4", lp2, err)
	}
	if a = check(t, lp2.Server, lp2.Key, 3, 0); len(a.Updates) != 1 || a.TS != "4" {
		t.Fatalf("the old ts with the new key: %+v", a)
	}
	s.FailLongPoll(7, vktest.FailedLost)
	if a = check(t, lp2.Server, lp2.Key, 4, 0); a.Failed != 3 {
		t.Fatalf("injected failed 3: %+v", a)
	}
	if n := s.LongPollRequests(7); n != 9 {
		t.Errorf("LongPollRequests = %d, want 10", n)
	}
}

func TestLongPollAcked(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	lp, err := vk.GroupsGetLongPollServer(api.Params{"group_id": 7})
	if err != nil {
		t.Fatal(err)
	}
	s.QueueEvents(7, event(1), event(2), event(3))
	check(t, lp.Server, "wrongkey", 2, 0)
	check(t, lp.Server, lp.Key, 9, 0) // beyond the history
	if n := s.LongPollAcked(7); n != 0 {
		t.Fatalf("acked %d after requests with a wrong key or ts, want 0", n)
	}
	check(t, lp.Server, lp.Key, 2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if n, err := s.WaitLongPollAcked(ctx, 7, 2); err != nil || n != 2 {
		t.Fatalf("WaitLongPollAcked = %d, %v; want 2", n, err)
	}
}
