// Package vktest provides a fake VK API server for tests and load tests.
//
// It answers the API methods the bot calls (messages.send, execute with
// messages.send sub-calls, groups.getById, groups.getTokenPermissions,
// groups.getLongPollServer and the Callback server setup methods) on a
// loopback address in the shape the real API uses for the version
// requested, serves the Bots Long Poll events tests queue (QueueEvents,
// FailLongPoll), records every accepted messages.send, and can be told
// to fail with given VK error codes (every call, the next calls of a
// method: FailCalls, the next sends whether single or sub-calls of
// execute: FailNext, or one peer's sends: FailPeer), to be slow, to
// enforce VK's per-token rate limit (error 6 past SetRateLimit calls in
// any second of a token), to ask for a captcha (FailAlways(14): error 14
// with captcha_sid and captcha_img), and to go down as a whole (see
// Outage); PeerCalls counts the sends for a peer. Like VK, it delivers one message
// per random_id of a community over its whole history (messages.send:
// random_id is unique "in relation to API_ID and the sender's ID"): a
// send repeating one is answered with the earlier message's id and not
// delivered (see Send.Delivered, Send.Swallowed). Every request is
// checked against VK's API schema (schema.go): what the schema does not
// define is refused with error 100, as VK may, and recorded (Violations). Point vksdk's MethodURL (the bot's
// VK_API_URL) at Server.MethodURL.
//
// A Server is safe for concurrent use.
package vktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Send is one messages.send call the server accepted.
type Send struct {
	Token    string
	PeerID   int
	Message  string
	RandomID int64
	// Forward is the quoted message (the forward parameter), nil if none.
	Forward *Forward
	// ReplyTo is the reply_to parameter, 0 if none.
	ReplyTo int
	At      time.Time
	// MessageID is the message id VK answered: the new message's, or for
	// a repeated random_id the earlier message's.
	MessageID int
	// Delivered is false for a send repeating an earlier random_id: VK
	// answers it with the earlier message's id and delivers nothing.
	Delivered bool
	// Swallowed marks a send not delivered whose earlier message is
	// another (another peer, text or quote): a reply VK lost in silence,
	// not a retry of the same reply.
	Swallowed bool
}

// A Server is a fake VK API listening on 127.0.0.1.
type Server struct {
	srv       *httptest.Server
	closing   chan struct{} // closed by Close, to release hanging requests
	closeOnce sync.Once

	mu         sync.Mutex // guards the fields below
	sends      []Send
	calls      map[string]int   // method → calls received
	failures   []int            // error codes for the next messages.send calls, in order
	callFails  map[string][]int // method → error codes for its next whole calls, in order
	violations []string         // requests refused for breaking VK's schema
	failAlways int              // error code for every call, 0 = none
	delay      time.Duration
	rateLimit  int                    // calls per second per token, 0 = none
	refused    map[string]int         // token → calls answered 6 by the rate limit
	callTimes  map[string][]time.Time // token → when each of its calls arrived
	recent     map[string][]time.Time // token → start times of its calls in the last second
	delivered  map[delivery]int       // (community, random_id) → message id
	tokenGroup map[string]int         // token → community, for the random_id rule
	messages   []Send                 // sends that delivered a message
	changed    chan struct{}          // closed and replaced whenever sends grows
	outage     Outage
	released   chan struct{}      // closed when a Hang outage ends
	hanging    int                // requests held by a Hang outage
	peerFaults map[int]*peerFault // peer_id → how its sends fail
	peerCalls  map[int]int        // peer_id → messages.send calls for it, sub-calls of execute and failed ones included

	lp     longPoll  // the Bots Long Poll server (longpoll.go)
	groups groupsAPI // the groups.* methods (groups.go)
}

// An Outage is how the whole fake API fails, as VK does when it is down
// or cut off; set it with SetOutage.
type Outage int

// The outages.
const (
	// Up is no outage: every request is served.
	Up Outage = iota
	// Unreachable closes each request's connection without an answer, a
	// failure at the transport level, as when VK cannot be reached.
	Unreachable
	// BadGateway answers every request 502 with an HTML page, as VK's
	// front servers do when the API behind them is down.
	BadGateway
	// Hang holds every request unanswered until the outage ends (the
	// request is then served), the client gives up, or the server closes.
	Hang
)

// String names o as the load tool's fault schedule does.
func (o Outage) String() string {
	switch o {
	case Up:
		return "up"
	case Unreachable:
		return "unreachable"
	case BadGateway:
		return "bad-gateway"
	case Hang:
		return "hang"
	}
	return "outage(" + strconv.Itoa(int(o)) + ")"
}

// A peerFault is a VK error code for a peer's sends: the next left of
// them, or all when left is negative.
type peerFault struct {
	code, left int
}

// badGatewayPage is the body of a BadGateway answer.
const badGatewayPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// delivery is what VK checks a random_id's uniqueness over: the sender
// (the community, named by its token unless SetTokenGroup says more) and
// the random_id.
type delivery struct {
	sender   string
	randomID int64
}

// NewServer starts a fake VK API on 127.0.0.1:0, for tests: it is
// Start(Options{}) and panics if it cannot listen, as httptest.NewServer
// does. Close it when done.
func NewServer() *Server {
	s, err := Start(Options{})
	if err != nil {
		panic(err)
	}
	return s
}

// Options configure a Server started by Start. Zero fields mean the
// defaults.
type Options struct {
	// Addr is the TCP address to listen on, such as "127.0.0.1:8099", so a
	// bot can be started with a VK_API_URL known in advance. Empty means
	// 127.0.0.1:0.
	Addr string
}

// Start starts a fake VK API configured by opts, or returns why it cannot
// listen. Close it when done.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("vktest: %w", err)
	}
	s := &Server{
		calls: map[string]int{}, recent: map[string][]time.Time{}, delivered: map[delivery]int{},
		changed: make(chan struct{}), closing: make(chan struct{}), peerFaults: map[int]*peerFault{},
		tokenGroup: map[string]int{}, callFails: map[string][]int{}, peerCalls: map[int]int{},
		refused: map[string]int{}, callTimes: map[string][]time.Time{},
	}
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
	return s, nil
}

// MethodURL is the base URL to give vksdk (api.VK.MethodURL) or the bot's
// VK_API_URL; it ends in "/method/".
func (s *Server) MethodURL() string { return s.srv.URL + "/method/" }

// Close shuts the server down, blocking until outstanding requests finish;
// requests held by a Hang outage are dropped unanswered. It may be called
// more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.srv.Close()
}

// Sends returns a copy of every accepted messages.send, in arrival order.
func (s *Server) Sends() []Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Send(nil), s.sends...)
}

// SendsFrom returns a copy of the accepted messages.send calls after the
// first i, in arrival order, so a caller polling a busy server copies only
// what is new.
func (s *Server) SendsFrom(i int) []Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.sends) {
		return nil
	}
	return append([]Send(nil), s.sends[max(i, 0):]...)
}

// SetTokenGroup makes tokens the tokens of community group: VK checks a
// random_id's uniqueness over every message the community sent, whichever
// of its tokens sent it. A token not given here is a community of its own.
func (s *Server) SetTokenGroup(group int, tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		s.tokenGroup[t] = group
	}
}

// Messages returns the messages delivered, as a VK user would see them:
// sends repeating a random_id the community used before are not among
// them.
func (s *Server) Messages() []Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Send(nil), s.messages...)
}

// Swallowed returns the sends VK answered with an earlier message's id
// though they were another reply (see Send.Swallowed), in arrival order.
func (s *Server) Swallowed() []Send {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Send
	for _, send := range s.sends {
		if send.Swallowed {
			out = append(out, send)
		}
	}
	return out
}

// SetRateLimit makes the server answer error 6 (too many requests) to a
// token's calls beyond perSecond in any one-second span, as VK does (20 for
// a community token). Zero removes the limit.
func (s *Server) SetRateLimit(perSecond int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = perSecond
}

// RateRefusals returns how many calls of token the rate limit answered
// with error 6.
func (s *Server) RateRefusals(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[token]
}

// maxCallTimes is how many calls of a token CallTimes keeps, the first.
const maxCallTimes = 1 << 20

// CallTimes returns when each call of token arrived (of every method,
// refused ones included), in order: its first 2^20.
func (s *Server) CallTimes(token string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.callTimes[token]...)
}

// Calls returns how many requests for method arrived, failed ones included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// FailNext makes the next len(codes) messages.send calls fail with the
// given VK error codes, in order (one per call, sub-calls of execute
// included); a 0 lets that call succeed.
func (s *Server) FailNext(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, codes...)
}

// FailCalls makes the next len(codes) whole calls of method fail with the
// given VK error codes, in order; a 0 lets that call through. Only calls
// that reach the method use one up: not those an outage, FailAlways, the
// rate limit or the schema check answered. For
// "execute" the whole call fails (as VK's error 13, a runtime error, does),
// not one sub-call (FailNext, FailPeer); for "messages.send" only a single
// send, not a sub-call of execute. Any method can be failed so, such as
// groups.getTokenPermissions.
func (s *Server) FailCalls(method string, codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callFails[method] = append(s.callFails[method], codes...)
}

// Violations returns the requests refused with error 100 for breaking
// VK's schema (an unknown parameter, a wrong type or range, a required one
// missing), each as the error's message, in arrival order: a test can
// require there are none.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// FailAlways makes every call fail with code until called again with 0;
// 14 answers as VK asks for a captcha (with captcha_sid and captcha_img).
func (s *Server) FailAlways(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAlways = code
}

// SetOutage makes the whole API fail as o says, from the next request on,
// until it is called again with Up (or another Outage). Ending a Hang
// serves the requests it held, unless their clients gave up.
func (s *Server) SetOutage(o Outage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o == s.outage {
		return
	}
	if s.outage == Hang {
		close(s.released)
	}
	s.outage = o
	if o == Hang {
		s.released = make(chan struct{})
	}
}

// Hanging returns how many requests a Hang outage is holding.
func (s *Server) Hanging() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hanging
}

// FailPeer makes the next n messages.send calls to peer (sub-calls of
// execute included) fail with the VK error code, such as 9 (flood
// control); n < 0 means every call, until FailPeer is called again for
// that peer. A code or n of 0 removes the fault. Calls that FailNext fails
// do not use one up.
func (s *Server) FailPeer(peer, code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 || n == 0 {
		delete(s.peerFaults, peer)
		return
	}
	s.peerFaults[peer] = &peerFault{code: code, left: n}
}

// PeerCalls returns how many messages.send calls for peer arrived (sub-calls
// of execute included) and reached the send itself, failed ones included:
// not those an outage, FailAlways, the rate limit or a whole call's
// injected failure answered.
func (s *Server) PeerCalls(peer int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peerCalls[peer]
}

// SetDelay makes every call wait d before answering.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// WaitSends blocks until at least n sends were accepted or ctx ends, and
// returns the sends accepted so far.
func (s *Server) WaitSends(ctx context.Context, n int) ([]Send, error) {
	for {
		s.mu.Lock()
		if len(s.sends) >= n {
			out := append([]Send(nil), s.sends...)
			s.mu.Unlock()
			return out, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return s.Sends(), fmt.Errorf("vktest: %d of %d sends: %w", len(s.Sends()), n, ctx.Err())
		}
	}
}

// apiError is VK's error object; a captcha's (14) also names the
// captcha to solve.
type apiError struct {
	Code       int    `json:"error_code"`
	Msg        string `json:"error_msg"`
	CaptchaSID string `json:"captcha_sid,omitempty"`
	CaptchaImg string `json:"captcha_img,omitempty"`
}

// errCaptcha is VK's error 14, "Captcha needed" (errors.json): VK asks for
// one after a method's quantity limit; the call is to be repeated with
// captcha_sid and captcha_key, the answer a person reads off captcha_img.
const errCaptcha = 14

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, longPollPath) {
		if s.passOutage(w, r) {
			s.serveLongPoll(w, r)
		}
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/method/")
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = r.Form.Get("access_token")
	}

	s.mu.Lock()
	s.calls[method]++
	if len(s.callTimes[token]) < maxCallTimes {
		s.callTimes[token] = append(s.callTimes[token], time.Now())
	}
	s.mu.Unlock()
	if !s.passOutage(w, r) {
		return
	}
	s.mu.Lock()
	delay, always := s.delay, s.failAlways
	limited := s.overLimit(token)
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}

	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if always != 0 {
		writeJSON(w, map[string]any{"error": errorFor(always)})
		return
	}
	if limited {
		writeJSON(w, map[string]any{"error": errorFor(6)})
		return
	}
	if _, known := methods[method]; known {
		if apiErr := checkRequest(method, r.Form); apiErr != nil {
			s.violated(apiErr)
			writeJSON(w, map[string]any{"error": apiErr})
			return
		}
	}
	if code := s.injected(method); code != 0 {
		writeJSON(w, map[string]any{"error": errorFor(code)})
		return
	}
	switch method {
	case "messages.send":
		id, apiErr := s.send(token, r.Form)
		if apiErr != nil {
			writeJSON(w, map[string]any{"error": apiErr})
			return
		}
		writeJSON(w, map[string]any{"response": id})
	case "execute":
		writeJSON(w, s.execute(token, r.Form.Get("code")))
	case "groups.getLongPollServer":
		writeJSON(w, s.getLongPollServer(r.Form))
	default:
		if answer, ok := s.serveGroups(method, token, r.Form); ok {
			writeJSON(w, answer)
			return
		}
		writeJSON(w, map[string]any{"error": apiError{Code: 3, Msg: "Unknown method passed"}})
	}
}

// passOutage fails the request as the current outage says, holding it
// while the API hangs. It returns true when the request is to be served.
func (s *Server) passOutage(w http.ResponseWriter, r *http.Request) bool {
	for {
		s.mu.Lock()
		outage, released := s.outage, s.released
		if outage == Hang {
			s.hanging++
		}
		s.mu.Unlock()
		switch outage {
		case Up:
			return true
		case Unreachable:
			hangUp(w)
			return false
		case BadGateway:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, badGatewayPage)
			return false
		}
		var served bool
		select {
		case <-released:
			served = r.Context().Err() == nil
		case <-r.Context().Done():
		case <-s.closing:
		}
		s.mu.Lock()
		s.hanging--
		s.mu.Unlock()
		if !served {
			return false
		}
	}
}

// hangUp closes the request's connection without a response.
func hangUp(w http.ResponseWriter) {
	if h, ok := w.(http.Hijacker); ok {
		if conn, _, err := h.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // the server closes the connection
}

// injected takes the next code FailCalls gave for a call of method: 0
// when none is left or the call is to go through.
func (s *Server) injected(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	codes := s.callFails[method]
	if len(codes) == 0 {
		return 0
	}
	s.callFails[method] = codes[1:]
	return codes[0]
}

// violated records a request refused for breaking the schema.
func (s *Server) violated(e *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, e.Msg)
}

// paramString is an execute argument as the HTTP parameter it stands for:
// strings and numbers as they are, objects and arrays as JSON.
func paramString(v any) string {
	switch v.(type) {
	case map[string]any, []any:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return fmt.Sprint(v)
}

func errorFor(code int) *apiError {
	e := &apiError{Code: code, Msg: "vktest: injected error " + strconv.Itoa(code)}
	if code == errCaptcha {
		e.Msg = "Captcha needed"
		e.CaptchaSID = "vktest"
		e.CaptchaImg = "https://api.vk.com/captcha.php?sid=vktest"
	}
	return e
}

func writeJSON(w http.ResponseWriter, v any) {
	json.NewEncoder(w).Encode(v)
}
