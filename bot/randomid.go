package bot

import (
	"github.com/vkcounter/vkcounter/bot/randomid"
	"github.com/vkcounter/vkcounter/callback"
)

// ref is m in the terms of the random_id rule.
func ref(m callback.Message) randomid.Message {
	return randomid.Message{GroupID: m.GroupID, PeerID: m.PeerID, ConversationMessageID: m.ConversationMessageID, ID: m.ID, EventID: m.EventID}
}

// messageRef returns what identifies m within its community (randomid.Ref).
func messageRef(m callback.Message) (string, bool) { return randomid.Ref(ref(m)) }

// RandomID returns the random_id of the reply to m, by the documented rule
// of package randomid.
func RandomID(m callback.Message) int32 { return randomid.Of(ref(m)) }

// dedupeKey returns the key that makes counting m idempotent: the
// message's own identity, the one its reply's random_id is derived from, so
// that one message is counted once, answered once, and a re-delivery (or a
// late run of a count whose caller gave up) is recognised whatever its
// event_id. A message numbered neither in its conversation nor in the
// dialogs falls back to VK's event id. The key is empty only for a message
// nothing identifies.
func dedupeKey(m callback.Message) string {
	if m.ConversationMessageID == 0 && m.ID == 0 {
		return m.EventID
	}
	ref, _ := messageRef(m)
	return "msg/" + ref
}

// replyKey returns what the outbox keeps one reply per: the message's
// identity within its community, or "" when nothing identifies it.
func replyKey(m callback.Message) string {
	ref, ok := messageRef(m)
	if !ok {
		return ""
	}
	return ref
}
