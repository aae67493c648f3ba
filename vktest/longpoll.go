package vktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// longPollPath is where the fake Bots Long Poll server answers: the server
// URL groups.getLongPollServer returns is this plus the group id.
const longPollPath = "/longpoll/"

// MaxLongPollWait is the longest wait a long-poll request may ask for, as
// VK documents (90 seconds).
const MaxLongPollWait = 90

// DefaultLongPollBatch is how many events one long-poll answer carries at
// most, unless SetLongPollBatch says otherwise.
const DefaultLongPollBatch = 100

// The Bots Long Poll failures VK documents; FailLongPoll injects them.
const (
	// FailedHistory (failed: 1) means the event history went out of date
	// or was partly lost: go on with the ts of the answer.
	FailedHistory = 1
	// FailedKey (failed: 2) means the key expired: get a new key with
	// groups.getLongPollServer and keep the ts.
	FailedKey = 2
	// FailedLost (failed: 3) means the information was lost: get a new
	// key and ts with groups.getLongPollServer.
	FailedLost = 3
)

// longPoll is the state of the fake Bots Long Poll server, per community.
// Its zero value is ready to use.
type longPoll struct {
	mu     sync.Mutex // guards the fields below
	groups map[int]*lpGroup
	batch  int // events per answer; 0 means DefaultLongPollBatch
}

// lpGroup is one community's event history. Event number n (1-based) is
// events[n-1-trimmed]; a request with ts=T answers the events numbered
// above T, and the answer's ts is the number of the last one returned.
type lpGroup struct {
	key      string
	keys     int // keys issued so far
	sessions int // groups.getLongPollServer answers given (each with the ts then)
	events   []json.RawMessage
	trimmed  int   // events dropped from the front of the history
	failures []int // failed codes for the next requests, in order
	polls    int   // long-poll requests answered
	changed  chan struct{}
	acked    int           // the highest ts a client asked for with a valid key
	ackedCh  chan struct{} // closed and replaced when acked grows
}

// group returns the state of community id, creating it. lp.mu must be held.
func (lp *longPoll) group(id int) *lpGroup {
	if lp.groups == nil {
		lp.groups = map[int]*lpGroup{}
	}
	g := lp.groups[id]
	if g == nil {
		g = &lpGroup{changed: make(chan struct{}), ackedCh: make(chan struct{})}
		lp.groups[id] = g
	}
	return g
}

// last is the number of the newest event.
func (g *lpGroup) last() int { return g.trimmed + len(g.events) }

// QueueEvents appends events (each a whole Bots Long Poll update, such as
// {"type":"message_new","event_id":…,"v":"5.199","object":{…},"group_id":…})
// to the history of group, waking the requests waiting for them, and
// returns the number of the last one.
func (s *Server) QueueEvents(group int, events ...json.RawMessage) int {
	lp := &s.lp
	lp.mu.Lock()
	defer lp.mu.Unlock()
	g := lp.group(group)
	for _, e := range events {
		g.events = append(g.events, append(json.RawMessage(nil), e...))
	}
	close(g.changed)
	g.changed = make(chan struct{})
	return g.last()
}

// LongPollTS returns the number of the newest event of group: what
// groups.getLongPollServer answers as ts.
func (s *Server) LongPollTS(group int) int {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	return s.lp.group(group).last()
}

// LongPollSessions returns how many groups.getLongPollServer answers were
// given for group. Calls counts a call when it comes in, before its answer
// reads the ts: events queued once LongPollSessions has grown come after
// that answer's ts, where after Calls has grown they may come before it
// (and be skipped, as VK skips events older than a new session's ts).
func (s *Server) LongPollSessions(group int) int {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	return s.lp.group(group).sessions
}

// LongPollRequests returns how many long-poll requests of group were
// answered, failed ones included.
func (s *Server) LongPollRequests(group int) int {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	return s.lp.group(group).polls
}

// LongPollAcked returns the highest ts a client of group asked for with a
// valid key. A client asking for the events after ts has, if it follows
// VK's protocol, handled those up to ts: it is the long-poll counterpart
// of a webhook's "ok".
func (s *Server) LongPollAcked(group int) int {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	return s.lp.group(group).acked
}

// WaitLongPollAcked blocks until LongPollAcked(group) reaches ts or ctx
// ends, and returns it.
func (s *Server) WaitLongPollAcked(ctx context.Context, group, ts int) (int, error) {
	for {
		s.lp.mu.Lock()
		g := s.lp.group(group)
		acked, ch := g.acked, g.ackedCh
		s.lp.mu.Unlock()
		if acked >= ts {
			return acked, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return acked, fmt.Errorf("vktest: long poll acknowledged %d of %d: %w", acked, ts, ctx.Err())
		}
	}
}

// FailLongPoll makes the next len(codes) long-poll requests of group fail
// with the given failed codes, in order (FailedHistory, FailedKey,
// FailedLost). FailedKey and FailedLost also expire the current key, so
// every later request with it fails with 2 until a new key is fetched.
// FailedHistory answers the oldest ts the history still holds at or after
// the one requested, so a client that goes on with it loses nothing the
// history has.
func (s *Server) FailLongPoll(group int, codes ...int) {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	g := s.lp.group(group)
	g.failures = append(g.failures, codes...)
}

// TrimLongPoll drops all but the newest keep events of group's history, as
// VK does with old events: a request for a dropped one gets failed 1.
func (s *Server) TrimLongPoll(group, keep int) {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	g := s.lp.group(group)
	if drop := len(g.events) - keep; drop > 0 {
		g.events = append([]json.RawMessage(nil), g.events[drop:]...)
		g.trimmed += drop
	}
}

// SetLongPollBatch sets the most events one long-poll answer carries; zero
// means DefaultLongPollBatch.
func (s *Server) SetLongPollBatch(n int) {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	s.lp.batch = n
}

// getLongPollServer answers groups.getLongPollServer: a key (kept until a
// failure expires it), the server URL and the current ts, as a string like
// VK's.
func (s *Server) getLongPollServer(form map[string][]string) map[string]any {
	group, err := strconv.Atoi(first(form, "group_id"))
	if err != nil || group <= 0 {
		return errorAnswer(100, "One of the parameters specified was missing or invalid: group_id is undefined")
	}
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	g := s.lp.group(group)
	if g.key == "" {
		g.keys++
		g.key = fmt.Sprintf("k%d-%d", group, g.keys)
	}
	g.sessions++
	return map[string]any{"response": map[string]any{
		"key":    g.key,
		"server": s.srv.URL + longPollPath + strconv.Itoa(group),
		"ts":     strconv.Itoa(g.last()),
	}}
}

// serveLongPoll answers one request to the long-poll server:
// ?act=a_check&key=K&ts=T&wait=W.
func (s *Server) serveLongPoll(w http.ResponseWriter, r *http.Request) {
	group, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, longPollPath))
	q := r.URL.Query()
	ts, errTS := strconv.Atoi(q.Get("ts"))
	wait, errWait := strconv.Atoi(q.Get("wait"))
	if err != nil || q.Get("act") != "a_check" || errTS != nil || ts < 0 || errWait != nil || wait < 0 {
		http.Error(w, "vktest: want /longpoll/<group>?act=a_check&key=&ts=&wait=", http.StatusBadRequest)
		return
	}
	wait = min(wait, MaxLongPollWait)
	deadline := time.NewTimer(time.Duration(wait) * time.Second)
	defer deadline.Stop()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	for {
		answer, ch := s.checkLongPoll(group, q.Get("key"), ts)
		if answer != nil {
			writeJSON(w, answer)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeJSON(w, map[string]any{"ts": strconv.Itoa(ts), "updates": []json.RawMessage{}})
			s.lp.mu.Lock()
			s.lp.group(group).polls++
			s.lp.mu.Unlock()
			return
		case <-r.Context().Done():
			return
		}
	}
}

// checkLongPoll returns the answer to a request for the events of group
// after ts, or nil and a channel closed when new events arrive.
func (s *Server) checkLongPoll(group int, key string, ts int) (map[string]any, <-chan struct{}) {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	g := s.lp.group(group)
	failed := func(code int, ts any) map[string]any {
		g.polls++
		if code != FailedHistory {
			return map[string]any{"failed": code}
		}
		return map[string]any{"failed": code, "ts": ts}
	}
	if len(g.failures) > 0 {
		code := g.failures[0]
		g.failures = g.failures[1:]
		if code == FailedKey || code == FailedLost {
			g.key = ""
		}
		return failed(code, max(ts, g.trimmed)), nil
	}
	if key == g.key && ts > g.acked && ts <= g.last() {
		g.acked = ts
		close(g.ackedCh)
		g.ackedCh = make(chan struct{})
	}
	switch {
	case g.key == "" || key != g.key:
		return failed(FailedKey, nil), nil
	case ts < g.trimmed:
		return failed(FailedHistory, g.trimmed), nil
	case ts > g.last():
		return failed(FailedHistory, g.last()), nil
	case ts == g.last():
		return nil, g.changed
	}
	batch := s.lp.batch
	if batch <= 0 {
		batch = DefaultLongPollBatch
	}
	from := ts - g.trimmed
	to := min(from+batch, len(g.events))
	g.polls++
	return map[string]any{"ts": strconv.Itoa(g.trimmed + to), "updates": g.events[from:to]}, nil
}
