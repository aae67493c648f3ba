package vktest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/vktest"
)

func newVK(s *vktest.Server, token string) *api.VK {
	vk := api.NewVK(token)
	vk.MethodURL = s.MethodURL()
	vk.Limit = 0
	return vk
}

// messagesSend calls messages.send with p alone (vksdk's MessagesSend adds
// empty user_ids and peer_ids, which the fake refuses as VK's schema does).
func messagesSend(vk *api.VK, p api.Params) (id int, err error) {
	err = vk.RequestUnmarshal("messages.send", &id, p)
	return id, err
}

func send(vk *api.VK, peer, rid int) error {
	_, err := messagesSend(vk, api.Params{"peer_id": peer, "message": "m", "random_id": rid})
	return err
}

func TestRepeatedRandomIDDeliversOnce(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	for _, rid := range []int{5, 5, 6} {
		if err := send(vk, 1, rid); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.Sends()) != 3 || len(s.Messages()) != 2 {
		t.Errorf("%d sends, %d messages; want 3 and 2", len(s.Sends()), len(s.Messages()))
	}
}

// TestRandomIDUniquePerCommunity: VK checks a random_id over every message
// the community sent, to any peer and through any of its tokens; a repeat
// is answered with the earlier message's id and delivers nothing, and one
// that is another reply is recorded as swallowed.
func TestRandomIDUniquePerCommunity(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	s.SetTokenGroup(1, "a", "b")
	a, b, other := newVK(s, "a"), newVK(s, "b"), newVK(s, "c")
	first, err := messagesSend(a, api.Params{"peer_id": 1, "message": "m", "random_id": 7})
	if err != nil {
		t.Fatal(err)
	}
	// The same reply again (a retry), another peer, another token of the
	// community: answered with the first message's id.
	for _, c := range []struct {
		vk   *api.VK
		peer int
	}{{a, 1}, {a, 2}, {b, 3}} {
		id, err := messagesSend(c.vk, api.Params{"peer_id": c.peer, "message": "m", "random_id": 7})
		if err != nil || id != first {
			t.Errorf("repeat to peer %d: id %d, %v; want the earlier %d", c.peer, id, err, first)
		}
	}
	// Another community may use the same random_id.
	if id, err := messagesSend(other, api.Params{"peer_id": 1, "message": "m", "random_id": 7}); err != nil || id == first {
		t.Errorf("another community: id %d, %v; want a new message", id, err)
	}
	if m := s.Messages(); len(m) != 2 {
		t.Errorf("%d messages delivered, want 2: %+v", len(m), m)
	}
	sw := s.Swallowed()
	if len(sw) != 2 || sw[0].PeerID != 2 || sw[1].PeerID != 3 || sw[0].Delivered || sw[0].MessageID != first {
		t.Errorf("swallowed %+v; want the sends to peers 2 and 3, answered %d", sw, first)
	}
}

func TestFailNextAndRateLimit(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	s.FailNext(901)
	var e *api.Error
	if err := send(vk, 1, 1); !errors.As(err, &e) || e.Code != 901 {
		t.Fatalf("got %v, want error 901", err)
	}
	s.SetRateLimit(3)
	var limited int
	for i := range 5 {
		if err := send(vk, 1, 10+i); errors.As(err, &e) && e.Code == 6 {
			limited++
		}
	}
	if limited != 2 {
		t.Errorf("%d of 5 calls in one second got error 6, want 2 beyond the limit of 3", limited)
	}
	if err := send(newVK(s, "other"), 1, 99); err != nil {
		t.Errorf("another token is limited too: %v", err)
	}
}

func TestExecuteReportsFailedSubCalls(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	s.FailNext(0, 901) // 0: no failure for the first sub-call
	vk := newVK(s, "t")
	var resp []any
	err := vk.Execute(`return [API.messages.send({"peer_id":1,"message":"a","random_id":1234567890}),API.messages.send({"peer_id":2,"message":"b","random_id":2})];`, &resp)
	var ee *api.ExecuteErrors
	if !errors.As(err, &ee) || len(*ee) != 1 || (*ee)[0].Code != 901 {
		t.Fatalf("execute error %v, want one execute error 901", err)
	}
	if len(resp) != 2 || resp[1] != false {
		t.Fatalf("response %v, want [id, false]", resp)
	}
	if m := s.Messages(); len(m) != 1 || m[0].RandomID != 1234567890 {
		t.Errorf("messages %+v", m)
	}
}

func TestWaitSendsHonoursContext(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.WaitSends(ctx, 1); err == nil {
		t.Fatal("WaitSends returned without sends")
	}
}

func TestOutages(t *testing.T) {
	for _, o := range []vktest.Outage{vktest.Unreachable, vktest.BadGateway} {
		t.Run(o.String(), func(t *testing.T) {
			s := vktest.NewServer()
			defer s.Close()
			vk := newVK(s, "t")
			s.SetOutage(o)
			var e *api.Error
			if err := send(vk, 1, 1); err == nil || errors.As(err, &e) {
				t.Fatalf("send during the outage: %v, want a transport or decoding error, not a VK error", err)
			}
			if len(s.Sends()) != 0 || s.Calls("messages.send") != 1 {
				t.Fatalf("%d sends recorded, %d calls; want 0 and 1", len(s.Sends()), s.Calls("messages.send"))
			}
			s.SetOutage(vktest.Up)
			if err := send(vk, 1, 1); err != nil || len(s.Messages()) != 1 {
				t.Fatalf("after the outage: %v, %d messages", err, len(s.Messages()))
			}
		})
	}
}

func TestBadGatewayIsHTML(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	s.SetOutage(vktest.BadGateway)
	resp, err := http.PostForm(s.MethodURL()+"messages.send", url.Values{"peer_id": {"1"}, "message": {"m"}, "random_id": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "502 Bad Gateway") {
		t.Fatalf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// waitHanging polls until the server holds n requests.
func waitHanging(t *testing.T, s *vktest.Server, n int) {
	t.Helper()
	eventually.True(t, 5*time.Second, fmt.Sprintf("%d requests hanging", n), func() bool { return s.Hanging() == n })
}

// TestHangServesOnRelease: a held request is served when the outage ends,
// one whose client gave up is not, and Close drops held requests.
func TestHangServesOnRelease(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	s.SetOutage(vktest.Hang)

	patient := make(chan error, 1)
	go func() { patient <- send(newVK(s, "t"), 1, 1) }()
	waitHanging(t, s, 1)
	impatient := newVK(s, "t")
	impatient.Client = &http.Client{Timeout: 50 * time.Millisecond}
	if err := send(impatient, 2, 2); err == nil {
		t.Fatal("a send returned during a hang")
	}
	// The impatient request arrived and was let go; the patient one is held.
	eventually.True(t, 5*time.Second, "2 calls arrived", func() bool { return s.Calls("messages.send") == 2 })
	waitHanging(t, s, 1)
	if len(s.Sends()) != 0 {
		t.Fatalf("sends recorded during the hang: %+v", s.Sends())
	}
	s.SetOutage(vktest.Up)
	if err := <-patient; err != nil {
		t.Fatalf("held send after the hang: %v", err)
	}
	if m := s.Messages(); len(m) != 1 || m[0].PeerID != 1 {
		t.Fatalf("messages %+v, want only the held send's", m)
	}
}

func TestCloseDropsHangingRequests(t *testing.T) {
	s := vktest.NewServer()
	s.SetOutage(vktest.Hang)
	done := make(chan error, 1)
	go func() { done <- send(newVK(s, "t"), 1, 1) }()
	waitHanging(t, s, 1)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a hanging request")
	}
	if err := <-done; err == nil {
		t.Error("a send dropped by Close succeeded")
	}
	s.Close()
}

// TestFailPeer: flood control for one peer, n times or always, for plain
// sends and inside execute; other peers are served.
func TestFailPeer(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	s.FailPeer(5, 9, 2)
	var e *api.Error
	for i := range 2 {
		if err := send(vk, 5, 100+i); !errors.As(err, &e) || e.Code != 9 {
			t.Fatalf("send %d to the flooded peer: %v, want error 9", i, err)
		}
		if err := send(vk, 6, 200+i); err != nil {
			t.Fatalf("send to another peer: %v", err)
		}
	}
	if err := send(vk, 5, 102); err != nil {
		t.Fatalf("third send to the peer: %v, want it served", err)
	}

	s.FailPeer(5, 9, -1)
	var resp []any
	err := vk.Execute(`return [API.messages.send({"peer_id":5,"message":"a","random_id":7}),API.messages.send({"peer_id":6,"message":"b","random_id":8}),API.messages.send({"peer_id":5,"message":"c","random_id":9})];`, &resp)
	var ee *api.ExecuteErrors
	if !errors.As(err, &ee) || len(*ee) != 2 || (*ee)[0].Code != 9 || (*ee)[1].Code != 9 {
		t.Fatalf("execute error %v, want two execute errors 9", err)
	}
	if len(resp) != 3 || resp[0] != false || resp[1] == false || resp[2] != false {
		t.Fatalf("response %v, want [false, id, false]", resp)
	}
	for range 3 {
		if err := send(vk, 5, 300); !errors.As(err, &e) || e.Code != 9 {
			t.Fatalf("send while always flooded: %v", err)
		}
	}
	s.FailPeer(5, 0, 0)
	if err := send(vk, 5, 300); err != nil {
		t.Fatalf("after the fault is removed: %v", err)
	}
}

// TestSchemaRefusesWhatVKDoesNotDefine: a parameter the method does not
// define, a value of the wrong type or range, a required one missing, a
// request without v, and the same in an execute sub-call are refused as
// VK's schema says, and recorded.
func TestSchemaRefusesWhatVKDoesNotDefine(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	var e *api.Error
	for _, p := range []api.Params{
		{"peer_id": 1, "message": "m", "random_id": 1, "user_ids": ""}, // vksdk's MessagesSend adds it
		{"peer_id": 1, "message": "m", "random_id": 1, "peer_ids": ""},
		{"peer_id": "x", "message": "m", "random_id": 1},
		{"peer_id": 1, "message": "m", "random_id": int64(1) << 31},
		{"peer_id": 1, "message": "m"},
		{"peer_id": 1, "message": "m", "random_id": 1, "forward": `{"peer_id":1,"conversation_message_ids":[1],"quote":1}`},
		{"peer_id": 1, "message": strings.Repeat("я", 9001), "random_id": 1},
	} {
		if _, err := messagesSend(vk, p); !errors.As(err, &e) || e.Code != 100 {
			t.Errorf("%v: %v, want error 100", p, err)
		}
	}
	if _, err := vk.GroupsGetCallbackServers(api.Params{"group_id": 0}); !errors.As(err, &e) || e.Code != 100 {
		t.Errorf("group_id 0: %v, want error 100", err)
	}
	resp, err := http.PostForm(s.MethodURL()+"messages.send", url.Values{"peer_id": {"1"}, "message": {"m"}, "random_id": {"1"}, "access_token": {"t"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"error_code":8`) {
		t.Errorf("no v: %s, want error 8", body)
	}
	var out []any
	err = vk.Execute(`return [API.messages.send({"peer_id":1,"message":"a","random_id":1,"user_ids":""}),API.messages.send({"peer_id":2,"message":"b","random_id":2})];`, &out)
	var ee *api.ExecuteErrors
	if !errors.As(err, &ee) || len(*ee) != 1 || (*ee)[0].Code != 100 || len(out) != 2 || out[0] != false {
		t.Errorf("execute with a bad sub-call: %v %v, want its sub-call alone refused with 100", out, err)
	}
	if n := len(s.Violations()); n != 10 {
		t.Errorf("%d violations recorded, want 10: %q", n, s.Violations())
	}
	if len(s.Messages()) != 1 {
		t.Errorf("%d messages delivered, want the good sub-call's alone", len(s.Messages()))
	}
}

// TestFailCallsOnEveryPath: an error code on a single send, on a whole
// execute and on one of its sub-calls.
func TestFailCallsOnEveryPath(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	var e *api.Error
	s.FailCalls("messages.send", 36)
	if err := send(vk, 1, 1); !errors.As(err, &e) || e.Code != 36 {
		t.Errorf("single send: %v, want error 36", err)
	}
	code := `return [API.messages.send({"peer_id":1,"message":"a","random_id":2}),API.messages.send({"peer_id":2,"message":"b","random_id":3})];`
	s.FailCalls("execute", 13)
	var out []any
	if err := vk.Execute(code, &out); !errors.As(err, &e) || e.Code != 13 {
		t.Errorf("whole execute: %v, want error 13", err)
	}
	if len(s.Sends()) != 0 {
		t.Fatalf("sends %+v after failed calls, want none", s.Sends())
	}
	s.FailNext(0, 7)
	var ee *api.ExecuteErrors
	if err := vk.Execute(code, &out); !errors.As(err, &ee) || (*ee)[0].Code != 7 || out[1] != false {
		t.Errorf("one sub-call: %v %v, want the second refused with 7", out, err)
	}
	if err := send(vk, 1, 4); err != nil || len(s.Messages()) != 2 {
		t.Errorf("then: %v, %d messages; want a send and 2 messages", err, len(s.Messages()))
	}
}
