package bot

import (
	"fmt"
	"strconv"

	"github.com/vkcounter/vkcounter/callback"
)

// ChatPeerBase is the first peer_id of a group chat: chat n is
// ChatPeerBase+n.
const ChatPeerBase = 2000000000

// Quote says which replies quote the message they answer (REPLY_QUOTE).
// The zero value is QuoteChats.
type Quote int

// The Quote values.
const (
	// QuoteChats quotes in group chats only, where a busy chat needs to
	// see which message a number belongs to: messages.send's forward
	// parameter with the message's conversation_message_id and is_reply.
	QuoteChats Quote = iota
	// QuoteAll also quotes in private dialogs, with reply_to, where the
	// message's id is known.
	QuoteAll
	// QuoteOff never quotes.
	QuoteOff
)

var quoteNames = [...]string{QuoteChats: "chats", QuoteAll: "all", QuoteOff: "off"}

// String returns the REPLY_QUOTE name of q.
func (q Quote) String() string {
	if q < 0 || int(q) >= len(quoteNames) {
		return fmt.Sprintf("Quote(%d)", int(q))
	}
	return quoteNames[q]
}

// ParseQuote reads a REPLY_QUOTE value: chats, all or off.
func ParseQuote(s string) (Quote, error) {
	for q, name := range quoteNames {
		if s == name {
			return Quote(q), nil
		}
	}
	return 0, fmt.Errorf("reply quote %q: want chats, all or off", s)
}

// quote sets r's quote of m as q says.
func (q Quote) quote(r *Reply, m callback.Message) {
	switch {
	case q == QuoteOff:
	case m.PeerID >= ChatPeerBase:
		r.QuoteCMID = m.ConversationMessageID
	case q == QuoteAll:
		r.ReplyTo = m.ID
	}
}

// forwardParam is messages.send's forward parameter quoting message cmid
// of peer as the one replied to: the JSON object
// {"peer_id":…,"conversation_message_ids":[…],"is_reply":true}.
func forwardParam(peer, cmid int) string {
	b := make([]byte, 0, 80)
	b = append(b, `{"peer_id":`...)
	b = strconv.AppendInt(b, int64(peer), 10)
	b = append(b, `,"conversation_message_ids":[`...)
	b = strconv.AppendInt(b, int64(cmid), 10)
	b = append(b, `],"is_reply":true}`...)
	return string(b)
}
