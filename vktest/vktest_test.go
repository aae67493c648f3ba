package vktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/vktest"
)

func newVK(s *vktest.Server, token string) *api.VK {
	vk := api.NewVK(token)
	vk.MethodURL = s.MethodURL()
	vk.Limit = 0
	return vk
}

func send(vk *api.VK, peer, rid int) error {
	_, err := vk.MessagesSend(api.Params{"peer_id": peer, "message": "m", "random_id": rid})
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
