package callback

import (
	"context"
	"strconv"
)

// Message is the part of a message_new event the bot needs.
type Message struct {
	// GroupID is the community the message was sent to.
	GroupID int
	// EventID is VK's id of the event; a re-delivery carries the same one.
	// It is empty only if VK sent none.
	EventID string

	// ID is the message id in the community's dialogs; 0 in group chats.
	ID int
	// ConversationMessageID numbers the message within its conversation.
	ConversationMessageID int
	// PeerID is the conversation to answer in: the user's id in a private
	// dialog, 2000000000+n in group chat n. It is always > 0.
	PeerID int
	// FromID is the author: a user id, or a negative community id (a
	// community or a bot writing in a chat); 0 if VK sent none.
	FromID int
	// Out reports an outgoing message: one the community itself sent.
	Out bool
	// Action is the type of a chat service message ("chat_invite_user",
	// "chat_title_update", ...), which carries no text of a person; empty
	// for an ordinary message. An action VK did not name reads "unknown".
	Action string
	// Text is the message text exactly as VK sent it.
	Text string
	// Attachments are the message's attachments, in VK's order.
	Attachments []Attachment
}

// Attachment is one attachment as the bot needs it to identify a message with no text.
type Attachment struct {
	// Type is VK's attachment type: "photo", "sticker", "doc", "audio",
	// "video", "link", "wall", ..., kept as sent for types this package
	// does not know.
	Type string
	// OwnerID is the owner of the attached object (for wall posts that
	// carry no owner_id, their to_id); 0 if it has none.
	OwnerID int64
	// ID is the object's id within its owner; 0 if it has none.
	ID int64
	// StickerID is the sticker's id; set for stickers only.
	StickerID int64
	// URL is the link's address; set for links only.
	URL string
}

// A MessageHandler handles the messages of message_new events.
//
// HandleMessage is called with the request's context, bounded by
// Options.Timeout; it must return once the context ends, even if its work
// goes on. A nil error means the message was handled: counted (now or by an
// earlier delivery of the same message), or deliberately not counted (not
// written by a person), and VK is answered "ok". Any error means it was not
// handled: VK is answered 503 and delivers the event again later.
// HandleMessage is called concurrently, once per request.
type MessageHandler interface {
	HandleMessage(ctx context.Context, m Message) error
}

// A MessageStarter is a MessageHandler whose work the Handler can start
// and wait for itself: StartMessage starts the handling of m and returns
// the channel its one result comes on (buffered: the work never waits for
// the Handler). The Handler waits until the result comes, the request's
// context ends or Options.Timeout has passed (up to Timeout/64 later, at
// most 100 ms: requests of the same moment share one deadline), and then
// calls GaveUp with the context's error if it stopped waiting; GaveUp
// returns the error to answer with, and the work goes on as it does when
// HandleMessage's context ends. The Handler then creates no context and no
// timer of its own per request. HandleMessage is not called.
type MessageStarter interface {
	MessageHandler
	StartMessage(m Message) <-chan error
	GaveUp(m Message, err error) error
}

// Await starts the handling of m on s and waits for its result until ctx
// ends or, when limit is not nil, limit does; then it returns what GaveUp
// answers with that context's error. A result there at once (a message
// decided without any work: not served, not a person's, a handler
// closing) is returned whatever the contexts say. It is the Handler's wait
// and a MessageStarter's HandleMessage alike.
func Await(ctx, limit context.Context, s MessageStarter, m Message) error {
	result := s.StartMessage(m)
	select {
	case err := <-result:
		return err
	default:
	}
	var limitDone <-chan struct{} // nil: never
	if limit != nil {
		limitDone = limit.Done()
	}
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return s.GaveUp(m, ctx.Err())
	case <-limitDone:
		return s.GaveUp(m, limit.Err())
	}
}

// MessageHandlerFunc adapts an ordinary function to a MessageHandler.
type MessageHandlerFunc func(ctx context.Context, m Message) error

// HandleMessage calls f(ctx, m).
func (f MessageHandlerFunc) HandleMessage(ctx context.Context, m Message) error {
	return f(ctx, m)
}

var _ MessageHandler = MessageHandlerFunc(nil)

// parseInt is strconv.ParseInt(string(b), 10, bits) reporting success
// only. The numbers VK sends (up to 18 digits) are read from b in place:
// the string conversion would allocate on every field of every message,
// since ParseInt's error keeps the string. Longer ones go to ParseInt.
func parseInt(b []byte, bits int) (int64, bool) {
	digits := b
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		v, err := strconv.ParseInt(string(b), 10, bits)
		return v, err == nil
	}
	var v int64 // 18 digits cannot overflow
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if b[0] == '-' {
		v = -v
	}
	if bits < 64 && (v < -1<<(bits-1) || v > 1<<(bits-1)-1) {
		return 0, false
	}
	return v, true
}
