package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// plan builds every event: texts round-robin, each event from its own
// conversation (or Peers of them), numbered in its conversation.
func (r *callbackRun) plan() {
	o := r.o
	r.texts = make([]string, o.Texts)
	for i := range r.texts {
		// Capitalised, so that a bot with NORMALIZE counts it under
		// another identity than one without.
		r.texts[i] = fmt.Sprintf("Нагрузка %s %d", r.runID, i)
	}
	n := o.Texts * o.PerText
	r.events = make([]*event, n)
	// Message numbers start at a base of this run's own, so that a second
	// run's messages are new messages to the bot, and a reply's quote
	// names a message of this run only.
	runNum, _ := strconv.ParseUint(r.runID, 16, 32)
	base := int(runNum&0x7fffffff) << 20
	// Conversations get ids spread over VK's ranges as real ones are, not
	// consecutive ones: a hash of consecutive keys collides far less than
	// chance, which would hide the collisions of a random_id derived from
	// the message. An odd multiplier and an offset of the run's own make a
	// bijection, so distinct conversations keep distinct ids, and so does
	// each peer's first conversation_message_id.
	mix, off := uint32(runNum)*2654435761|1, uint32(runNum)
	spread := func(i int, bits uint) int { return int((uint32(i)*mix + off) & (1<<bits - 1)) }
	cmids := map[int]int{}
	for seq := range n {
		conv := seq
		if o.Peers > 0 {
			conv = seq % o.Peers
		}
		e := &event{id: fmt.Sprintf("lt%s%08x", r.runID, seq), seq: seq, text: seq % o.Texts, from: 1 + spread(conv, 29), bare: picked(seq, o.NoEventID)}
		e.peer, e.msgID = e.from, base+seq+1
		if conv%chatEvery == chatEvery-1 {
			e.peer, e.msgID = chatPeerBase+1+spread(conv/chatEvery, 20), 0
		}
		if _, ok := cmids[e.peer]; !ok {
			cmids[e.peer] = base + spread(e.peer, 19)
		}
		cmids[e.peer]++
		e.cmid = cmids[e.peer]
		r.events[seq] = e
	}
}

// eventID is the event_id e is posted with: empty for a bare event.
func (e *event) eventID() string {
	if e.bare {
		return ""
	}
	return e.id
}

// picked tells whether the event numbered seq is one of a share f of all
// events, spread evenly: exactly floor(n·f) of the first n are (Bresenham).
func picked(seq int, f float64) bool {
	return int(float64(seq+1)*f) > int(float64(seq)*f)
}

// body is e as VK posts it (API 5.199).
func (r *callbackRun) body(e *event) []byte {
	type message struct {
		Date        int64  `json:"date"`
		FromID      int    `json:"from_id"`
		ID          int    `json:"id"`
		Out         int    `json:"out"`
		Attachments []any  `json:"attachments"`
		CMID        int    `json:"conversation_message_id"`
		Text        string `json:"text"`
		PeerID      int    `json:"peer_id"`
		RandomID    int    `json:"random_id"`
	}
	type clientInfo struct {
		ButtonActions []string `json:"button_actions"`
		Keyboard      bool     `json:"keyboard"`
		LangID        int      `json:"lang_id"`
	}
	v := struct {
		GroupID int    `json:"group_id"`
		Type    string `json:"type"`
		EventID string `json:"event_id,omitempty"`
		V       string `json:"v"`
		Object  struct {
			Message    message    `json:"message"`
			ClientInfo clientInfo `json:"client_info"`
		} `json:"object"`
		Secret string `json:"secret,omitempty"`
	}{GroupID: r.o.GroupID, Type: "message_new", EventID: e.eventID(), V: vkapi.Version, Secret: r.o.Secret}
	v.Object.Message = message{
		Date: time.Now().Unix(), FromID: e.from, ID: e.msgID, Attachments: []any{},
		CMID: e.cmid, Text: r.texts[e.text], PeerID: e.peer,
	}
	v.Object.ClientInfo = clientInfo{ButtonActions: []string{"text"}, Keyboard: true}
	b, _ := json.Marshal(v) // cannot fail: plain values only
	return b
}

// prefill stores o.Expired occurrences of every text beyond the window,
// through the bot's own configuration.
func (r *callbackRun) prefill(ctx context.Context) error {
	if err := r.o.Prefill(ctx, r.texts, r.o.Expired, r.window); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	return nil
}
