package callback

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/SevereCloud/vksdk/v2/events"
)

// An Event is one community event as the Callback API posts it and the
// Bots Long Poll API lists it in "updates": the same envelope, decoded by
// DecodeEvent as leniently as the webhook decodes it.
type Event struct {
	Type    events.EventType
	GroupID int
	EventID string
	// Secret is the secret key; the Bots Long Poll API sends none.
	Secret string
	// Object is the event's object, undecoded.
	Object json.RawMessage
}

// DecodeEvent decodes one event envelope. Only type, group_id, event_id,
// secret and object are read; an event without a type is an error.
func DecodeEvent(data []byte) (Event, error) {
	env, err := decodeEnvelope(data)
	if err != nil {
		return Event{}, err
	}
	return Event{Type: events.EventType(env.Type), GroupID: env.GroupID, EventID: env.EventID, Secret: env.Secret, Object: env.Object}, nil
}

// Message decodes the message of a message_new event exactly as the
// webhook does, with GroupID and EventID taken from the envelope. The error
// says what is wrong in words safe to log.
func (e Event) Message() (Message, error) {
	if e.Type != events.EventMessageNew {
		return Message{}, fmt.Errorf("event type %q: not %s", e.Type, events.EventMessageNew)
	}
	m, err := decodeMessage(e.Object)
	if err != nil {
		return Message{}, err
	}
	m.GroupID, m.EventID = e.GroupID, e.EventID
	return m, nil
}

// decodeEnvelope decodes the envelope of an event. Unmarshal copies what
// it keeps (strings, the raw object), so data can be reused once it
// returns.
func decodeEnvelope(data []byte) (envelope, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return envelope{}, fmt.Errorf("event envelope: %w", err)
	}
	if env.Type == "" {
		return envelope{}, errors.New("event envelope: no type")
	}
	return env, nil
}
