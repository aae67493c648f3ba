package loadtest

import "github.com/vkcounter/vkcounter/vktest"

// An attributor tells which event a send answers, without knowing the
// random_id the bot chose: by the message the send quotes (forward's
// conversation_message_id in a group chat, reply_to or forward's message
// id in a dialog), else by an earlier quoted send of the same reply (the
// same peer and random_id: a retry without its quote), else by the
// conversation when only one event came from it.
type attributor struct {
	byCMID  map[cmidKey]*event
	byMsgID map[int]*event
	byPeer  map[int]*event      // conversations with one event
	byReply map[replyKey]*event // replies attributed by their quote
}

// cmidKey names a message by its conversation and number there.
type cmidKey struct{ peer, cmid int }

// replyKey names one reply as VK deduplicates it: its peer and random_id.
type replyKey struct {
	peer int
	rid  int64
}

func newAttributor(events []*event) *attributor {
	a := &attributor{byCMID: map[cmidKey]*event{}, byMsgID: map[int]*event{}, byPeer: map[int]*event{}, byReply: map[replyKey]*event{}}
	several := map[int]bool{}
	for _, e := range events {
		a.byCMID[cmidKey{e.peer, e.cmid}] = e
		if e.msgID != 0 {
			a.byMsgID[e.msgID] = e
		}
		if _, seen := a.byPeer[e.peer]; seen || several[e.peer] {
			delete(a.byPeer, e.peer)
			several[e.peer] = true
		} else {
			a.byPeer[e.peer] = e
		}
	}
	return a
}

// of returns the event s answers, and whether s went to another
// conversation than that event's (it quotes it from elsewhere). A nil
// event means s answers no event a reply can be told to be for.
func (a *attributor) of(s vktest.Send) (e *event, wrongPeer bool) {
	if e = a.quoted(s); e != nil {
		if e.peer != s.PeerID {
			return e, true
		}
		a.byReply[replyKey{s.PeerID, s.RandomID}] = e
		return e, false
	}
	if e = a.byReply[replyKey{s.PeerID, s.RandomID}]; e != nil {
		return e, false
	}
	return a.byPeer[s.PeerID], false
}

// quoted returns the event whose message s quotes, if any.
func (a *attributor) quoted(s vktest.Send) *event {
	if f := s.Forward; f != nil {
		if len(f.ConversationMessageIDs) > 0 {
			return a.byCMID[cmidKey{f.PeerID, f.ConversationMessageIDs[0]}]
		}
		if len(f.MessageIDs) > 0 {
			return a.byMsgID[f.MessageIDs[0]]
		}
	}
	if s.ReplyTo != 0 {
		return a.byMsgID[s.ReplyTo]
	}
	return nil
}
