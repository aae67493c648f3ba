package bot

import (
	"hash/fnv"
	"strconv"

	"github.com/vkcounter/vkcounter/callback"
)

// RandomID returns the random_id of the reply to m. It is derived from the
// message alone (community, peer and conversation_message_id; in private
// dialogs without one, the message id; failing both, the event id), so every
// retry of the same reply carries the same random_id and VK delivers at most
// one of them. The result is a positive 31-bit number, as VK expects.
func RandomID(m callback.Message) int32 {
	h := fnv.New64a()
	key := strconv.Itoa(m.GroupID) + ":" + strconv.Itoa(m.PeerID) + ":"
	switch {
	case m.ConversationMessageID != 0:
		key += "c" + strconv.Itoa(m.ConversationMessageID)
	case m.ID != 0:
		key += "m" + strconv.Itoa(m.ID)
	default:
		key += "e" + m.EventID
	}
	h.Write([]byte(key))
	id := int32(h.Sum64() & 0x7fffffff)
	if id == 0 {
		id = 1 // 0 means "no deduplication" to VK
	}
	return id
}
