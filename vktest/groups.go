package vktest

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// A CallbackServer is one Callback API server registered in a community of
// the fake API, with its settings.
type CallbackServer struct {
	ID        int
	Title     string
	URL       string
	SecretKey string
	// Status is VK's: "unconfigured", "failed", "wait" or "ok". The fake
	// registers servers as "unconfigured"; SetCallbackStatus changes it.
	Status string
	// APIVersion is the version events are sent in ("" until set).
	APIVersion string
	// Events are the event types and whether each is sent (1) or not (0).
	Events map[string]int
}

// maxCallbackTitle is the longest title VK accepts for a Callback server.
const maxCallbackTitle = 14

// defaultCallbackEvents are the event types of a new server and their
// settings, as VK lists them in groups.getCallbackSettings (a part).
var defaultCallbackEvents = map[string]int{
	"message_new": 0, "message_reply": 1, "message_edit": 1, "message_allow": 1, "message_deny": 1,
	"message_typing_state": 0, "message_event": 0, "photo_new": 1, "wall_post_new": 1, "wall_reply_new": 1,
	"group_join": 1, "group_leave": 1, "group_change_settings": 0, "like_add": 0, "like_remove": 0,
}

// groupsAPI is the state of the fake's community methods. Its zero value
// is ready to use.
type groupsAPI struct {
	mu            sync.Mutex // guards the fields below
	servers       map[int][]*CallbackServer
	nextID        int
	confirmations map[int]string
	masks         map[string]int // SetTokenMask's, by token
}

// tokenMask is what groups.getTokenPermissions answers: messages and manage.
const tokenMask = 4096 | 262144

// SetTokenMask sets the permissions mask groups.getTokenPermissions
// answers for token (by default messages and manage), as a community
// admin changes a token's rights in VK's settings.
func (s *Server) SetTokenMask(token string, mask int) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if s.groups.masks == nil {
		s.groups.masks = map[string]int{}
	}
	s.groups.masks[token] = mask
}

// getByIDListedUntil is the last API version whose groups.getById answers a
// bare list; later ones answer {"groups": [...], "profiles": [...]}.
const getByIDListedUntil = "5.193"

// SetConfirmation sets the code groups.getCallbackConfirmationCode answers
// for group (by default "vktest-<group>").
func (s *Server) SetConfirmation(group int, code string) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if s.groups.confirmations == nil {
		s.groups.confirmations = map[int]string{}
	}
	s.groups.confirmations[group] = code
}

// CallbackServers returns copies of the Callback servers of group, in the
// order they were added.
func (s *Server) CallbackServers(group int) []CallbackServer {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	out := make([]CallbackServer, 0, len(s.groups.servers[group]))
	for _, cs := range s.groups.servers[group] {
		c := *cs
		c.Events = make(map[string]int, len(cs.Events))
		for k, v := range cs.Events {
			c.Events[k] = v
		}
		out = append(out, c)
	}
	return out
}

// AddCallbackServer registers a server in group as someone did by hand in
// VK's settings, and returns its id.
func (s *Server) AddCallbackServer(group int, title, url, secret string) int {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	return s.groups.add(group, title, url, secret)
}

// SetCallbackStatus sets the status of server id in group.
func (s *Server) SetCallbackStatus(group, id int, status string) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if cs := s.groups.find(group, id); cs != nil {
		cs.Status = status
	}
}

// add registers a server. g.mu must be held.
func (g *groupsAPI) add(group int, title, url, secret string) int {
	if g.servers == nil {
		g.servers = map[int][]*CallbackServer{}
	}
	g.nextID++
	events := make(map[string]int, len(defaultCallbackEvents))
	for k, v := range defaultCallbackEvents {
		events[k] = v
	}
	g.servers[group] = append(g.servers[group], &CallbackServer{ID: g.nextID, Title: title, URL: url,
		SecretKey: secret, Status: "unconfigured", Events: events})
	return g.nextID
}

// find returns server id of group, or nil. g.mu must be held.
func (g *groupsAPI) find(group, id int) *CallbackServer {
	for _, cs := range g.servers[group] {
		if cs.ID == id {
			return cs
		}
	}
	return nil
}

// serveGroups answers the groups.* methods other than getLongPollServer;
// ok is false for a method it does not know.
func (s *Server) serveGroups(method, token string, form url.Values) (answer map[string]any, ok bool) {
	switch method {
	case "groups.getById":
		return s.getByID(form), true
	case "groups.getTokenPermissions":
		// Every token of the fake is a community token with the messages
		// and manage rights, unless SetTokenMask says otherwise
		// (FailAlways makes VK refuse it instead).
		s.groups.mu.Lock()
		mask, set := s.groups.masks[token]
		s.groups.mu.Unlock()
		if !set {
			mask = tokenMask
		}
		perms := []map[string]any{}
		for _, p := range []struct {
			name string
			bit  int
		}{{"messages", 4096}, {"manage", 262144}} {
			if mask&p.bit != 0 {
				perms = append(perms, map[string]any{"name": p.name, "setting": p.bit})
			}
		}
		return response(map[string]any{"mask": mask, "permissions": perms}), true
	}
	group, err := strconv.Atoi(form.Get("group_id"))
	if err != nil || group <= 0 {
		switch method {
		case "groups.getCallbackServers", "groups.addCallbackServer", "groups.editCallbackServer",
			"groups.getCallbackSettings", "groups.setCallbackSettings", "groups.getCallbackConfirmationCode":
			return errorAnswer(100, "One of the parameters specified was missing or invalid: group_id is undefined"), true
		}
		return nil, false
	}
	g := &s.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	serverID, _ := strconv.Atoi(form.Get("server_id"))
	switch method {
	case "groups.getCallbackConfirmationCode":
		code, set := g.confirmations[group]
		if !set {
			code = "vktest-" + strconv.Itoa(group)
		}
		return response(map[string]any{"code": code}), true
	case "groups.getCallbackServers":
		items := []map[string]any{}
		for _, cs := range g.servers[group] {
			items = append(items, map[string]any{"id": cs.ID, "title": cs.Title, "creator_id": 1,
				"url": cs.URL, "secret_key": cs.SecretKey, "status": cs.Status})
		}
		return response(map[string]any{"count": len(items), "items": items}), true
	case "groups.addCallbackServer", "groups.editCallbackServer":
		title, u := form.Get("title"), form.Get("url")
		if u == "" || title == "" || len([]rune(title)) > maxCallbackTitle {
			return errorAnswer(100, "One of the parameters specified was missing or invalid: url and title (at most 14 characters) are required"), true
		}
		if method == "groups.addCallbackServer" {
			return response(map[string]any{"server_id": g.add(group, title, u, form.Get("secret_key"))}), true
		}
		cs := g.find(group, serverID)
		if cs == nil {
			return errorAnswer(100, "One of the parameters specified was missing or invalid: server_id"), true
		}
		cs.Title, cs.URL, cs.SecretKey, cs.Status = title, u, form.Get("secret_key"), "unconfigured"
		return response(1), true
	case "groups.getCallbackSettings":
		cs := g.find(group, serverID)
		if cs == nil {
			return errorAnswer(100, "One of the parameters specified was missing or invalid: server_id"), true
		}
		return response(map[string]any{"api_version": cs.APIVersion, "events": cs.Events}), true
	case "groups.setCallbackSettings":
		cs := g.find(group, serverID)
		if cs == nil {
			return errorAnswer(100, "One of the parameters specified was missing or invalid: server_id"), true
		}
		if v := form.Get("api_version"); v != "" {
			cs.APIVersion = v
		}
		for k, vs := range form {
			if _, known := cs.Events[k]; known && len(vs) > 0 {
				switch vs[0] {
				case "1", "true":
					cs.Events[k] = 1
				case "0", "false":
					cs.Events[k] = 0
				}
			}
		}
		return response(1), true
	}
	return nil, false
}

// getByID answers groups.getById in the shape of the version asked for: a
// bare list up to 5.193, {"groups": [...], "profiles": [...]} from 5.194.
func (s *Server) getByID(form url.Values) map[string]any {
	ids := []int{1}
	if raw := form.Get("group_ids") + "," + form.Get("group_id"); strings.Trim(raw, ",") != "" {
		ids = ids[:0]
		for _, f := range strings.Split(raw, ",") {
			if id, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && id > 0 {
				ids = append(ids, id)
			}
		}
		sort.Ints(ids)
	}
	groups := make([]map[string]any, len(ids))
	for i, id := range ids {
		groups[i] = map[string]any{"id": id, "name": "vktest " + strconv.Itoa(id), "screen_name": "club" + strconv.Itoa(id), "type": "group"}
	}
	if versionBefore(form.Get("v"), getByIDListedUntil) {
		return response(groups)
	}
	return response(map[string]any{"groups": groups, "profiles": []any{}})
}

// versionBefore tells whether API version v is at most last ("5.193"
// style); a missing or malformed v counts as the newest.
func versionBefore(v, last string) bool {
	parse := func(s string) (int, int, bool) {
		maj, minor, ok := strings.Cut(s, ".")
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(minor)
		return a, b, ok && err1 == nil && err2 == nil
	}
	a, b, ok := parse(v)
	la, lb, _ := parse(last)
	return ok && (a < la || a == la && b <= lb)
}

func response(v any) map[string]any { return map[string]any{"response": v} }

func errorAnswer(code int, msg string) map[string]any {
	return map[string]any{"error": apiError{Code: code, Msg: msg}}
}

// first returns the first value of key in form, or "".
func first(form map[string][]string, key string) string {
	if v := form[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
