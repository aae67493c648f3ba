package bot

import (
	"errors"
	"fmt"

	"github.com/vkcounter/vkcounter/callback"
)

// Reasons a message is not counted or answered; Answered returns them.
var (
	// ErrNotAPerson: the author is a community (from_id < 0), such as
	// another bot in a chat; answering it would let two bots answer each
	// other forever. A message with no author (from_id 0) is not a
	// person's either.
	ErrNotAPerson = errors.New("bot: not written by a person")
	// ErrOutgoing: the community's own message (out: 1).
	ErrOutgoing = errors.New("bot: outgoing message")
	// ErrServiceMessage: a chat service message (a user invited or left,
	// the title changed), which has no text of a person.
	ErrServiceMessage = errors.New("bot: chat service message")
)

// Answered returns nil when m is a message the bot counts and answers: one
// a person wrote to the community. Otherwise it returns the reason
// (ErrNotAPerson, ErrOutgoing or ErrServiceMessage), and m is neither
// counted nor answered nor added to the activity counters. A message with a
// keyboard payload is a person's message and is counted by its text.
func Answered(m callback.Message) error {
	switch {
	case m.FromID <= 0:
		return ErrNotAPerson
	case m.Out:
		return ErrOutgoing
	case m.Action != "":
		return fmt.Errorf("%w (%s)", ErrServiceMessage, m.Action)
	}
	return nil
}
