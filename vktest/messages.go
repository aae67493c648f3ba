package vktest

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// messages.send and execute as VK answers them: the random_id rule per
// community, the flood limit, and execute's sub-calls.

// send validates and records one messages.send; it returns the message id or a VK error.
func (s *Server) send(token string, form map[string][]string) (int, *apiError) {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	peer, err1 := strconv.Atoi(get("peer_id"))
	rid, err2 := strconv.ParseInt(get("random_id"), 10, 64)
	if err1 != nil || err2 != nil || get("message") == "" {
		return 0, &apiError{Code: 100, Msg: "One of the parameters specified was missing or invalid"}
	}
	forward, replyTo, err := quoteParams(form)
	if err != nil {
		return 0, &apiError{Code: 100, Msg: "One of the parameters specified was missing or invalid: " + err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peerCalls[peer]++
	if len(s.failures) > 0 {
		code := s.failures[0]
		s.failures = s.failures[1:]
		if code != 0 {
			return 0, errorFor(code)
		}
	}
	if f := s.peerFaults[peer]; f != nil {
		if f.left > 0 {
			if f.left--; f.left == 0 {
				delete(s.peerFaults, peer)
			}
		}
		return 0, errorFor(f.code)
	}
	send := Send{Token: token, PeerID: peer, Message: get("message"), RandomID: rid, Forward: forward, ReplyTo: replyTo, At: time.Now()}
	key := delivery{s.sender(token), rid}
	if id, dup := s.delivered[key]; dup && rid != 0 {
		send.MessageID = id
		send.Swallowed = !sameReply(s.messages[id-1], send)
	} else {
		send.MessageID, send.Delivered = len(s.messages)+1, true
		s.messages = append(s.messages, send)
		s.delivered[key] = send.MessageID
	}
	s.sends = append(s.sends, send)
	close(s.changed)
	s.changed = make(chan struct{})
	return send.MessageID, nil
}

// sender names the community token sends for, as the random_id rule
// sees it. s.mu must be held.
func (s *Server) sender(token string) string {
	if g, ok := s.tokenGroup[token]; ok {
		return "group " + strconv.Itoa(g)
	}
	return "token " + token
}

// sameReply tells whether b is a sent again: the same peer, text and
// quote.
func sameReply(a, b Send) bool {
	return a.PeerID == b.PeerID && a.Message == b.Message && a.ReplyTo == b.ReplyTo &&
		(a.Forward == nil) == (b.Forward == nil) && (a.Forward == nil || reflect.DeepEqual(*a.Forward, *b.Forward))
}

// overLimit records a call of token and tells whether it exceeds the rate
// limit. s.mu must be held.
func (s *Server) overLimit(token string) bool {
	if s.rateLimit <= 0 {
		return false
	}
	now := time.Now()
	calls := s.recent[token]
	for len(calls) > 0 && now.Sub(calls[0]) >= time.Second {
		calls = calls[1:]
	}
	if len(calls) >= s.rateLimit {
		s.recent[token] = calls
		s.refused[token]++
		return true
	}
	s.recent[token] = append(calls, now)
	return false
}

// subCall matches one API.messages.send({...}) of an execute code; the
// argument is the JSON object the bot writes.
var subCall = regexp.MustCompile(`API\.messages\.send\((\{[^()]*\})\)`)

// execute runs the messages.send sub-calls of code as VK does: each failed
// sub-call is false in the response and adds an entry to execute_errors.
func (s *Server) execute(token, code string) map[string]any {
	calls := subCall.FindAllStringSubmatch(code, -1)
	if len(calls) == 0 || len(calls) > 25 {
		return map[string]any{"error": apiError{Code: 12, Msg: "Unable to compile code"}}
	}
	response := make([]any, len(calls))
	var execErrors []map[string]any
	for i, c := range calls {
		var p map[string]any
		dec := json.NewDecoder(strings.NewReader(c[1]))
		dec.UseNumber() // random_id must not turn into 1.2e+09
		if err := dec.Decode(&p); err != nil {
			return map[string]any{"error": apiError{Code: 12, Msg: "Unable to compile code: " + err.Error()}}
		}
		form := map[string][]string{}
		for k, v := range p {
			form[k] = []string{paramString(v)}
		}
		apiErr := checkParams("messages.send", form, false)
		if apiErr != nil {
			s.violated(apiErr)
		}
		var id int
		if apiErr == nil {
			id, apiErr = s.send(token, form)
		}
		if apiErr != nil {
			response[i] = false
			execErrors = append(execErrors, map[string]any{"method": "messages.send", "error_code": apiErr.Code, "error_msg": apiErr.Msg})
			continue
		}
		response[i] = id
	}
	out := map[string]any{"response": response}
	if execErrors != nil {
		out["execute_errors"] = execErrors
	}
	return out
}
