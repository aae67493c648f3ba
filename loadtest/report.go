package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// A ProblemKind names one way an answer can be wrong.
type ProblemKind string

// Problems found by the callback tool.
const (
	// Missing: an event the bot answered "ok" got no reply.
	Missing ProblemKind = "missing"
	// Duplicate: one event's reply was delivered more than once, that is
	// under several random_ids (sends repeating a random_id are dropped by
	// VK and are not duplicates).
	Duplicate ProblemKind = "duplicate"
	// WrongNumber: a reply carries a number other than the one due, or two
	// sends with the same random_id carry different numbers.
	WrongNumber ProblemKind = "wrong_number"
	// WrongPeer: the reply to an event went to another conversation.
	WrongPeer ProblemKind = "wrong_peer"
	// Swallowed: an event's reply was sent, but VK answered every send of
	// it with an earlier message's id and delivered nothing: its random_id
	// had been used before in the community.
	Swallowed ProblemKind = "swallowed"
	// RepeatedSend: one event's reply was sent more than once with the
	// same random_id. VK drops the repeats, but a bot that makes them
	// relies on that as its first line of defence. Checked with
	// CallbackOptions.StrictSends (on under a fault schedule).
	RepeatedSend ProblemKind = "repeated_send"
	// BadRequest: a request to the fake VK API that VK's schema does not
	// allow (a parameter the method does not define, a wrong type or
	// range, a required one missing), which VK may refuse.
	BadRequest ProblemKind = "bad_request"
	// Unexpected: a reply that answers no event of the run.
	Unexpected ProblemKind = "unexpected"
	// NotCounted: an event the bot never answered "ok", after every retry.
	NotCounted ProblemKind = "not_counted"
)

// Problems found by the counters tool.
const (
	// WrongStatus: a response status other than the one due.
	WrongStatus ProblemKind = "wrong_status"
	// WrongBody: a response body other than the one due.
	WrongBody ProblemKind = "wrong_body"
	// OutOfStep: a response whose opcode or opaque is not that of the
	// request it answers in order.
	OutOfStep ProblemKind = "out_of_step"
	// Broken: a connection failed (bad magic, framing, I/O error or no
	// answer in time); its outstanding requests are unanswered.
	Broken ProblemKind = "connection"
	// OverMaximum: with a shared maximum, a grant that took what the run's
	// connections hold of a counter past the maximum.
	OverMaximum ProblemKind = "over_maximum"
	// WrongConsumption: with a shared maximum, a server whose final
	// consumption of a counter is not what the run's connections hold.
	WrongConsumption ProblemKind = "wrong_consumption"
)

// callbackKinds and counterKinds are the kinds each tool reports, in the
// order the table lists them.
var (
	callbackKinds = []ProblemKind{WrongNumber, Missing, Duplicate, RepeatedSend, WrongPeer, Swallowed, BadRequest, Unexpected, NotCounted}
	counterKinds  = []ProblemKind{WrongStatus, WrongBody, OutOfStep, Broken, OverMaximum, WrongConsumption}
)

// A Problem is one wrong answer.
type Problem struct {
	Kind ProblemKind `json:"kind"`
	// Subject says what was answered: the event (id, text, peer) or the
	// request (connection, opcode, opaque).
	Subject string `json:"subject"`
	Want    string `json:"want,omitempty"`
	Got     string `json:"got,omitempty"`
}

// String describes p on one line: kind, subject, what was due and what came.
func (p Problem) String() string {
	s := string(p.Kind) + ": " + p.Subject
	if p.Want != "" || p.Got != "" {
		s += fmt.Sprintf(": want %s, got %s", p.Want, p.Got)
	}
	return s
}

// A Check is the verdict on every answer of a run.
type Check struct {
	// Checked is the number of answers checked: replies to events, or
	// responses to counter requests.
	Checked int64 `json:"checked"`
	// Problems counts the wrong answers by kind; every kind the tool
	// checks is present, zero or not.
	Problems map[ProblemKind]int64 `json:"problems"`
	// Listed holds the first few problems of each kind.
	Listed []Problem `json:"listed,omitempty"`
	// Resent counts sends repeating an earlier (peer, random_id), which VK
	// drops: the second send of a retried event, a problem (RepeatedSend)
	// only when sends are checked strictly.
	Resent int64 `json:"resent,omitempty"`

	kinds []ProblemKind
}

func newCheck(kinds []ProblemKind) Check {
	c := Check{Problems: map[ProblemKind]int64{}, kinds: kinds}
	for _, k := range kinds {
		c.Problems[k] = 0
	}
	return c
}

// add counts p and lists it if fewer than maxListed of its kind are.
func (c *Check) add(p Problem) {
	c.Problems[p.Kind]++
	if c.Problems[p.Kind] <= maxListed {
		c.Listed = append(c.Listed, p)
	}
}

// Wrong returns the number of wrong answers of every kind.
func (c *Check) Wrong() int64 {
	var n int64
	for _, v := range c.Problems {
		n += v
	}
	return n
}

// A Report is the outcome of one run: throughput, latency, errors and the
// verdict on every answer. Print it with WriteTable, WriteJSON or
// WriteHTML.
type Report struct {
	// Tool is "callback" or "counters".
	Tool string `json:"tool"`
	// Scenario describes the load in words.
	Scenario string `json:"scenario"`
	// Target is the webhook URL or the counter server address.
	Target  string    `json:"target"`
	Started time.Time `json:"started"`
	// Elapsed is how long requests were being sent; waiting for replies
	// afterwards is not included.
	Elapsed time.Duration `json:"-"`
	// Stopped says why sending ended: "done" (every event or request
	// sent), "duration", "window" (the bot's window would have run out),
	// "interrupted" or "connections failed".
	Stopped string `json:"stopped"`
	// Requests counts every request sent, retries included.
	Requests int64 `json:"requests"`
	// Errors counts requests that failed (not answered "ok", or an
	// HTTP or connection error), by kind in ErrorKinds.
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	// Events counts the distinct events posted (callback only), and
	// Reposts the deliberate re-posts of events already answered "ok".
	Events  int64 `json:"events,omitempty"`
	Reposts int64 `json:"reposts,omitempty"`
	// Prefill is the time spent writing expired occurrences before the
	// run (callback -expired only).
	Prefill time.Duration `json:"-"`
	// Latency summarises each timed series: "webhook" and "reply" (from
	// posting an event to its reply reaching the fake VK API) for the
	// callback tool, one per request opcode for the counters tool.
	Latency []Latency `json:"latency"`
	// Faults lists the faults injected (callback only), with when each
	// began and ended.
	Faults []FaultRecord `json:"faults,omitempty"`
	// ClosedByServer, with a shared maximum (counters -max), is what the
	// connections the servers closed held (a server gives up a
	// connection whose lease it lost).
	ClosedByServer *ClosedByServer `json:"closed_by_server,omitempty"`
	Check          Check           `json:"check"`

	charts []chartSeries
}

// ClosedByServer is what the connections a server closed held, with a
// shared maximum, a release the close cut off included. Their units stop
// counting as held when the close is seen (or the release is sent); a
// count above the maximum they may explain (it happened after the
// connection's last answered request was sent and before they stopped
// counting, and the units bring it within the maximum) is not a problem,
// and is counted in Excused.
type ClosedByServer struct {
	Connections int64 `json:"connections"`
	Units       int64 `json:"units"`
	Excused     int64 `json:"excused_over_maximum"`
}

// RequestsPerSecond is Requests over Elapsed.
func (r *Report) RequestsPerSecond() float64 { return perSecond(r.Requests, r.Elapsed) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// OK reports whether every answer was right and every event counted.
func (r *Report) OK() bool { return r.Check.Wrong() == 0 }

// MarshalJSON adds the derived rates and the times in seconds.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report // without this method
	return json.Marshal(struct {
		*plain
		ElapsedSeconds    float64 `json:"elapsed_s"`
		RequestsPerSecond float64 `json:"requests_per_s"`
		EventsPerSecond   float64 `json:"events_per_s,omitempty"`
		PrefillSeconds    float64 `json:"prefill_s,omitempty"`
		OK                bool    `json:"ok"`
	}{(*plain)(r), r.Elapsed.Seconds(), round3(r.RequestsPerSecond()), round3(perSecond(r.Events, r.Elapsed)), r.Prefill.Seconds(), r.OK()})
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: the figures, a latency table,
// the verdict, and the problems listed.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\ntarget: %s\n", r.Tool, r.Scenario, r.Target)
	if r.Prefill > 0 {
		fmt.Fprintf(&b, "prefill: %s\n", fmtDuration(r.Prefill))
	}
	fmt.Fprintf(&b, "stopped: %s after %s: %s, %.0f requests/s", r.Stopped, fmtDuration(r.Elapsed), plural(r.Requests, "request", "requests"), r.RequestsPerSecond())
	if r.Events > 0 {
		fmt.Fprintf(&b, "; %s, %.0f events/s", plural(r.Events, "event", "events"), perSecond(r.Events, r.Elapsed))
	}
	if r.Reposts > 0 {
		fmt.Fprintf(&b, "; %d re-posted", r.Reposts)
	}
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "\nfault %s: %s", f.Fault, f.span())
	}
	if c := r.ClosedByServer; c != nil {
		fmt.Fprintf(&b, "\nclosed by server: %s holding %s (no longer counted as held)", plural(c.Connections, "connection", "connections"), plural(c.Units, "unit", "units"))
		if c.Excused > 0 {
			fmt.Fprintf(&b, "; %s above the maximum explained by them", plural(c.Excused, "count", "counts"))
		}
	}
	fmt.Fprintf(&b, "\nerrors: %d", r.Errors)
	for _, k := range sortedKeys(r.ErrorKinds) {
		fmt.Fprintf(&b, "  [%s: %d]", k, r.ErrorKinds[k])
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tcount\tp50\tp90\tp99\tmax\t")
	for _, l := range r.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", l.Name, l.Count, fmtDuration(l.P50), fmtDuration(l.P90), fmtDuration(l.P99), fmtDuration(l.Max))
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nanswers checked: %d", r.Check.Checked)
	for _, k := range r.Check.kinds {
		fmt.Fprintf(&b, ", %s: %d", k, r.Check.Problems[k])
	}
	if r.Check.Resent > 0 {
		fmt.Fprintf(&b, " (resent with the same random_id, dropped by VK: %d)", r.Check.Resent)
	}
	b.WriteString("\n")
	for _, p := range r.Check.Listed {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	if r.OK() {
		b.WriteString("result: every answer right\n")
	} else {
		fmt.Fprintf(&b, "result: %s\n", plural(r.Check.Wrong(), "wrong answer", "wrong answers"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural returns n with the noun for it: plural(1, "text", "texts") is
// "1 text", plural(2, …) "2 texts".
func plural[N int | int64 | uint32](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// fmtDuration prints d with three significant digits in µs, ms or s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// span says when f was in force, from the run's start.
func (f FaultRecord) span() string {
	if f.Ended == 0 {
		return "not applied (the run was interrupted)"
	}
	s := fmtDuration(f.Began) + " → " + fmtDuration(f.Ended)
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	return s
}
