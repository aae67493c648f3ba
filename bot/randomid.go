package bot

import (
	"hash/fnv"
	"strconv"

	"github.com/vkcounter/vkcounter/callback"
)

// messageRef returns what identifies m within its community: the
// conversation and conversation_message_id ("peer:c<n>"); in private
// dialogs without one, the message id ("peer:m<n>"); failing both, the
// event id ("peer:e<id>"). ok is false when m carries none of them.
func messageRef(m callback.Message) (ref string, ok bool) {
	ref = strconv.Itoa(m.PeerID) + ":"
	switch {
	case m.ConversationMessageID != 0:
		return ref + "c" + strconv.Itoa(m.ConversationMessageID), true
	case m.ID != 0:
		return ref + "m" + strconv.Itoa(m.ID), true
	default:
		return ref + "e" + m.EventID, m.EventID != ""
	}
}

// RandomID returns the random_id of the reply to m. It is derived from the
// message alone (community, peer and conversation_message_id; in private
// dialogs without one, the message id; failing both, the event id), so every
// retry of the same reply carries the same random_id and VK delivers at most
// one of them. The result is a positive 31-bit number, as VK expects.
func RandomID(m callback.Message) int32 {
	ref, _ := messageRef(m)
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(m.GroupID) + ":" + ref))
	id := int32(h.Sum64() & 0x7fffffff)
	if id == 0 {
		id = 1 // 0 means "no deduplication" to VK
	}
	return id
}

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
