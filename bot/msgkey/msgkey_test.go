package msgkey_test

import (
	"testing"

	"github.com/vkcounter/vkcounter/bot/msgkey"
)

// The keys are written to Redis (the dedupe key; the reply key, hashed) by this version
// and by those before it: they must not change. The values were taken from
// the code before the keys moved here.
func TestKeysDoNotChange(t *testing.T) {
	for _, tc := range []struct {
		m             msgkey.Message
		dedupe, reply string
		identified    bool
	}{
		{msgkey.Message{GroupID: 1, PeerID: 2000000001, ConversationMessageID: 17, ID: 5, EventID: "a"}, "msg/2000000001:c17", "2000000001:c17", true},
		{msgkey.Message{GroupID: 7, PeerID: 5, ID: 3, EventID: "ev"}, "msg/5:m3", "5:m3", true},
		{msgkey.Message{GroupID: 7, PeerID: 5, EventID: "ev-1"}, "ev-1", "5:eev-1", true},
		{msgkey.Message{GroupID: 7, PeerID: 5}, "", "", false},
		{msgkey.Message{GroupID: 123456, PeerID: 2000000002, ConversationMessageID: 1}, "msg/2000000002:c1", "2000000002:c1", true},
	} {
		if got := tc.m.DedupeKey(); got != tc.dedupe {
			t.Errorf("%+v: DedupeKey %q, want %q", tc.m, got, tc.dedupe)
		}
		if got := tc.m.ReplyKey(); got != tc.reply {
			t.Errorf("%+v: ReplyKey %q, want %q", tc.m, got, tc.reply)
		}
		if _, ok := tc.m.Key(); ok != tc.identified {
			t.Errorf("%+v: Key ok %v, want %v", tc.m, ok, tc.identified)
		}
	}
}
