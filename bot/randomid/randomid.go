// Package randomid is the documented rule deriving the random_id of the
// bot's reply from the message it answers. The bot uses it to send, and a
// checker (the load tool) uses it to recognise the reply, so both read the
// one rule and neither reaches into the other.
//
// A message is identified within its community by its conversation and
// conversation_message_id; in a private dialog without one, by its message
// id; failing both, by VK's event id. Every retry of the same reply
// therefore carries the same random_id, and VK delivers at most one of
// them.
package randomid

import (
	"hash/fnv"
	"strconv"
)

// A Message is what the rule reads of a message: its community (GroupID),
// its conversation (PeerID), its number there (ConversationMessageID) or in
// the dialogs (ID), and the event id VK delivered it with.
type Message struct {
	GroupID, PeerID, ConversationMessageID, ID int
	EventID                                    string
}

// Ref returns what identifies m within its community: "peer:c<n>" by its
// conversation_message_id; in private dialogs without one, "peer:m<n>" by
// its message id; failing both, "peer:e<id>" by its event id. ok is false
// when m carries none of them.
func Ref(m Message) (ref string, ok bool) {
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

// Of returns the random_id of the reply to m: FNV-1a (64 bits) of
// "group:ref", its low 31 bits, and 1 instead of 0 (0 means "no
// deduplication" to VK). The result is a positive 31-bit number, as VK
// expects.
func Of(m Message) int32 {
	ref, _ := Ref(m)
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(m.GroupID) + ":" + ref))
	id := int32(h.Sum64() & 0x7fffffff)
	if id == 0 {
		id = 1
	}
	return id
}
