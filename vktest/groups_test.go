package vktest_test

import (
	"testing"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/vktest"
)

// TestGetByIDShapedByVersion shows why vksdk's GroupsGetByID must not be
// used with the version the bot speaks: it decodes the bare list answered
// up to 5.193 and fails on the object answered from 5.194 on.
func TestGetByIDShapedByVersion(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	vk.Version = "5.131"
	if g, err := vk.GroupsGetByID(api.Params{"group_id": 5}); err != nil || len(g) != 1 || g[0].ID != 5 {
		t.Fatalf("5.131: %+v, %v", g, err)
	}
	vk.Version = "5.199"
	if _, err := vk.GroupsGetByID(api.Params{"group_id": 5}); err == nil {
		t.Fatal("5.199: vksdk decoded {groups, profiles} as a list")
	}
	var resp struct {
		Groups []struct {
			ID int `json:"id"`
		} `json:"groups"`
	}
	if err := vk.RequestUnmarshal("groups.getById", &resp, api.Params{"group_id": 5}); err != nil || len(resp.Groups) != 1 || resp.Groups[0].ID != 5 {
		t.Fatalf("5.199 object: %+v, %v", resp, err)
	}
}

func TestCallbackServerMethods(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	vk.Version = "5.199"
	if _, err := vk.GroupsAddCallbackServer(api.Params{"group_id": 3, "url": "https://x/cb", "title": "a title of 15 c"}); err == nil {
		t.Fatal("a 15-character title was accepted")
	}
	add, err := vk.GroupsAddCallbackServer(api.Params{"group_id": 3, "url": "https://x/cb", "title": "vkcounter", "secret_key": "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vk.GroupsEditCallbackServer(api.Params{"group_id": 3, "server_id": add.ServerID, "url": "https://y/cb", "title": "vkcounter", "secret_key": "s2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := vk.GroupsSetCallbackSettings(api.Params{"group_id": 3, "server_id": add.ServerID, "api_version": "5.199", "message_new": true, "wall_post_new": 0}); err != nil {
		t.Fatal(err)
	}
	list, err := vk.GroupsGetCallbackServers(api.Params{"group_id": 3})
	if err != nil || list.Count != 1 || list.Items[0].URL != "https://y/cb" || list.Items[0].SecretKey != "s2" {
		t.Fatalf("getCallbackServers = %+v, %v", list, err)
	}
	got := s.CallbackServers(3)[0]
	if got.APIVersion != "5.199" || got.Events["message_new"] != 1 || got.Events["wall_post_new"] != 0 || got.Events["message_reply"] != 1 {
		t.Fatalf("settings = %+v", got)
	}
	s.SetConfirmation(3, "abc123")
	code, err := vk.GroupsGetCallbackConfirmationCode(api.Params{"group_id": 3})
	if err != nil || code.Code != "abc123" {
		t.Fatalf("confirmation = %+v, %v", code, err)
	}
}

func TestSendRecordsQuote(t *testing.T) {
	s := vktest.NewServer()
	defer s.Close()
	vk := newVK(s, "t")
	fwd := `{"peer_id":2000000001,"conversation_message_ids":[42],"is_reply":true}`
	if _, err := messagesSend(vk, api.Params{"peer_id": 2000000001, "message": "0", "random_id": 1, "forward": fwd}); err != nil {
		t.Fatal(err)
	}
	if _, err := messagesSend(vk, api.Params{"peer_id": 5, "message": "0", "random_id": 2, "reply_to": 77}); err != nil {
		t.Fatal(err)
	}
	code := `return [API.messages.send({"peer_id":2000000001,"message":"1","random_id":3,"forward":` +
		`"{\"peer_id\":2000000001,\"conversation_message_ids\":[43],\"is_reply\":true}"})];`
	if err := vk.ExecuteWithArgs(code, api.Params{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := messagesSend(vk, api.Params{"peer_id": 5, "message": "0", "random_id": 4, "forward": `{"peer_id":5}`}); err == nil {
		t.Error("a forward without a message was accepted")
	}
	sends := s.Sends()
	if len(sends) != 3 {
		t.Fatalf("%d sends, want 3", len(sends))
	}
	if f := sends[0].Forward; f == nil || f.PeerID != 2000000001 || len(f.ConversationMessageIDs) != 1 || f.ConversationMessageIDs[0] != 42 || !f.IsReply {
		t.Errorf("forward = %+v", f)
	}
	if sends[1].ReplyTo != 77 || sends[1].Forward != nil {
		t.Errorf("reply_to send = %+v", sends[1])
	}
	if f := sends[2].Forward; f == nil || f.ConversationMessageIDs[0] != 43 {
		t.Errorf("forward inside execute = %+v", f)
	}
}
