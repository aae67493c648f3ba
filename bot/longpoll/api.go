// The Bots Long Poll API's wire: asking for a session, one long-poll
// request, and reading its answer and ts as VK sends them.

package longpoll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
)

// maxAnswerBytes limits the body of one long-poll answer.
const maxAnswerBytes = 32 << 20

// server is a long-poll session from groups.getLongPollServer.
type server struct {
	url, key, ts string
}

// server asks for a long-poll session. vksdk's response type fits 5.199:
// {"key": "…", "server": "https://…", "ts": "…"}.
func (p *Poller) server(ctx context.Context) (server, error) {
	s, err := p.opts.API.GroupsGetLongPollServer(api.Params{"group_id": p.opts.GroupID}.WithContext(ctx))
	if err != nil {
		return server{}, fmt.Errorf("groups.getLongPollServer: %w", err)
	}
	if s.Server == "" || s.Key == "" {
		return server{}, errors.New("groups.getLongPollServer: no server or key")
	}
	if !validTS(s.Ts) {
		return server{}, fmt.Errorf("groups.getLongPollServer: ts %.40q is not an event number", s.Ts)
	}
	return server{url: s.Server, key: s.Key, ts: s.Ts}, nil
}

// answer is one long-poll answer.
type answer struct {
	ts      string
	failed  int
	updates []json.RawMessage
}

// check makes one long-poll request.
func (p *Poller) check(ctx context.Context, srv *server, ts string) (answer, error) {
	u, err := url.Parse(srv.url)
	if err != nil {
		return answer{}, fmt.Errorf("server %q: %w", srv.url, err)
	}
	q := u.Query()
	q.Set("act", "a_check")
	q.Set("key", srv.key)
	q.Set("ts", ts)
	q.Set("wait", strconv.Itoa(int(p.opts.Wait/time.Second)))
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return answer{}, err
	}
	resp, err := p.opts.Client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("long poll server answered %s", resp.Status)
	}
	p.stats.requests.Add(1)
	return decodeAnswer(body)
}

// decodeAnswer decodes {"ts": "5", "updates": [...]} or {"failed": n,
// "ts": 5}: ts and failed may each be a number or a string.
func decodeAnswer(body []byte) (answer, error) {
	var raw struct {
		TS      json.RawMessage   `json:"ts"`
		Failed  json.RawMessage   `json:"failed"`
		Updates []json.RawMessage `json:"updates"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return answer{}, fmt.Errorf("long poll answer: %w", err)
	}
	ts, err := parseTS(raw.TS)
	if err != nil {
		return answer{}, fmt.Errorf("long poll answer: %w", err)
	}
	var a answer
	a.ts, a.updates = ts, raw.Updates
	if len(raw.Failed) > 0 && string(raw.Failed) != "null" {
		n, err := strconv.Atoi(string(bytes.Trim(raw.Failed, `"`)))
		if err != nil {
			return answer{}, fmt.Errorf("long poll answer: failed %s", raw.Failed)
		}
		a.failed = n
	}
	if a.failed == 0 && a.ts == "" {
		return answer{}, errors.New("long poll answer: no ts")
	}
	return a, nil
}

// maxTSDigits bounds a ts: VK's event numbers fit in far fewer digits.
const maxTSDigits = 40

// parseTS reads a ts as VK sends it, an event number: a JSON integer or a
// string of decimal digits. Missing or null is "" (no ts); anything else
// (an object, an array, a boolean, a fraction, other characters) is
// refused, so that it is never sent back as the next request's ts.
func parseTS(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	ts := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &ts); err != nil {
			return "", fmt.Errorf("ts %.40s: %w", raw, err)
		}
	}
	if !validTS(ts) {
		return "", fmt.Errorf("ts %.40s: not an event number", raw)
	}
	return ts, nil
}

// validTS reports whether ts is an event number: 1 to maxTSDigits decimal
// digits.
func validTS(ts string) bool {
	if ts == "" || len(ts) > maxTSDigits {
		return false
	}
	for _, c := range []byte(ts) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
