// Package msgkey is the message key: what identifies one message VK
// delivered, as opposed to its text (the bot's text key, what counts as
// "the same message"). Everything that must happen once per message is
// keyed by it: the count's dedupe key and the reply the outbox keeps one
// of. The bot uses it to count and store, and a checker (the load tool)
// uses it to recognise the reply, so both read the one rule and neither
// reaches into the other.
//
// A message is identified within its community by its conversation and
// conversation_message_id; in a private dialog without one, by its message
// id; failing both, by VK's event id. Every re-delivery of the message
// therefore has the same keys.
// (Earlier versions also derived the reply's random_id from the message
// key; a hash of 31 bits repeats among a community's replies within weeks.
// The outbox now gives each reply the community's next random_id, and the
// replies queued before keep the one they were stored with.)
package msgkey

import "strconv"

// A Message is what the rule reads of a message: its community (GroupID),
// its conversation (PeerID), its number there (ConversationMessageID) or in
// the dialogs (ID), and the event id VK delivered it with.
type Message struct {
	GroupID, PeerID, ConversationMessageID, ID int
	EventID                                    string
}

// Key returns the message key of m, what identifies it within its
// community: "peer:c<n>" by its conversation_message_id; in private
// dialogs without one, "peer:m<n>" by its message id; failing both,
// "peer:e<id>" by its event id. ok is false when m carries none of them.
func (m Message) Key() (key string, ok bool) {
	var buf [64]byte
	b, ok := m.appendKey(buf[:0])
	return string(b), ok
}

// appendKey appends the message key of m (see Key) to b.
func (m Message) appendKey(b []byte) ([]byte, bool) {
	b = append(strconv.AppendInt(b, int64(m.PeerID), 10), ':')
	switch {
	case m.ConversationMessageID != 0:
		return strconv.AppendInt(append(b, 'c'), int64(m.ConversationMessageID), 10), true
	case m.ID != 0:
		return strconv.AppendInt(append(b, 'm'), int64(m.ID), 10), true
	default:
		return append(append(b, 'e'), m.EventID...), m.EventID != ""
	}
}

// DedupeKey returns the key that makes counting m idempotent: "msg/" and
// its message key, so that one message is counted once, answered once, and
// a re-delivery (or a late run of a count whose caller gave up) is
// recognised whatever its event_id. A message numbered neither in its
// conversation nor in the dialogs is keyed by VK's event id alone. The key
// is empty only for a message nothing identifies.
func (m Message) DedupeKey() string {
	if m.ConversationMessageID == 0 && m.ID == 0 {
		return m.EventID
	}
	var buf [64]byte
	b, _ := m.appendKey(append(buf[:0], "msg/"...))
	return string(b)
}

// ReplyKey returns what the outbox keeps one reply per: the message key,
// or "" when nothing identifies m.
func (m Message) ReplyKey() string {
	key, ok := m.Key()
	if !ok {
		return ""
	}
	return key
}
