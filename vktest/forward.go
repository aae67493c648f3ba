package vktest

import (
	"encoding/json"
	"errors"
	"strconv"
)

// A Forward is the forward parameter of a messages.send: the message the
// reply quotes.
type Forward struct {
	PeerID                 int   `json:"peer_id"`
	ConversationMessageIDs []int `json:"conversation_message_ids"`
	MessageIDs             []int `json:"message_ids"`
	IsReply                bool  `json:"is_reply"`
}

// quoteParams reads the forward and reply_to parameters of a messages.send;
// a malformed one is an error, as VK answers error 100.
func quoteParams(form map[string][]string) (*Forward, int, error) {
	var replyTo int
	if s := first(form, "reply_to"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, 0, errors.New("reply_to must be a positive message id")
		}
		replyTo = n
	}
	s := first(form, "forward")
	if s == "" {
		return nil, replyTo, nil
	}
	var f Forward
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, 0, errors.New("forward must be a JSON object: " + err.Error())
	}
	if f.PeerID == 0 || len(f.ConversationMessageIDs)+len(f.MessageIDs) == 0 {
		return nil, 0, errors.New("forward needs peer_id and conversation_message_ids or message_ids")
	}
	if replyTo != 0 {
		return nil, 0, errors.New("forward and reply_to cannot be given together")
	}
	return &f, replyTo, nil
}
