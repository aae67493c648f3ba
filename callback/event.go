package callback

import (
	"encoding/json"
	"fmt"

	"github.com/SevereCloud/vksdk/v2/events"
	"github.com/valyala/fastjson"
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
	// Object is the event's object as sent, less the blanks between its
	// tokens; nil if the event has none.
	Object json.RawMessage
}

// DecodeEvent decodes one event envelope. Only type, group_id, event_id,
// secret and object are read; an event without a type is an error.
func DecodeEvent(data []byte) (Event, error) {
	d := getDecoder()
	defer d.release()
	env, err := d.decodeEnvelope(data)
	if err != nil {
		return Event{}, err
	}
	ev := Event{Type: env.typ, GroupID: env.groupID, EventID: env.eventID, Secret: string(env.secret)}
	if env.object != nil {
		ev.Object = env.object.MarshalTo(nil)
	}
	return ev, nil
}

// Message decodes the message of a message_new event exactly as the
// webhook does, with GroupID and EventID taken from the envelope. The error
// says what is wrong in words safe to log.
func (e Event) Message() (Message, error) {
	if e.Type != events.EventMessageNew {
		return Message{}, fmt.Errorf("event type %q: not %s", e.Type, events.EventMessageNew)
	}
	d := getDecoder()
	defer d.release()
	var object *fastjson.Value
	if e.Object != nil {
		v, err := d.parse(e.Object)
		if err != nil {
			return Message{}, fmt.Errorf("message_new object: %w", err)
		}
		object = v
	}
	m, err := d.message(object)
	if err != nil {
		return Message{}, err
	}
	m.GroupID, m.EventID = e.GroupID, e.EventID
	return m, nil
}

// decodeEnvelope parses data and decodes the envelope of the event. The
// envelope is valid until d is reused.
func (d *decoder) decodeEnvelope(data []byte) (envelope, error) {
	v, err := d.parse(data)
	if err != nil {
		return envelope{}, fmt.Errorf("event envelope: %w", err)
	}
	return d.envelope(v)
}
