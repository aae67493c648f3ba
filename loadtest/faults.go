package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/vktest"
)

// A FaultKind names a fault the callback tool injects during a run.
type FaultKind string

// The faults. Redis faults act on a proxy in front of the bot's Redis, VK
// faults on the fake VK API.
const (
	// RedisStall holds every byte between the bot and Redis, keeping the
	// connections open: a paused Redis, a slow fork, a failover.
	RedisStall FaultKind = "redis-stall"
	// RedisCut closes every connection to Redis and refuses new ones: a
	// dead Redis.
	RedisCut FaultKind = "redis-cut"
	// RedisLatency delays every chunk of bytes each way by its value.
	RedisLatency FaultKind = "redis-latency"
	// VKDown closes every VK API request's connection unanswered.
	VKDown FaultKind = "vk-down"
	// VKBadGateway answers every VK API request 502 with an HTML page.
	VKBadGateway FaultKind = "vk-502"
	// VKHang holds every VK API request until the fault ends or the bot
	// gives up.
	VKHang FaultKind = "vk-hang"
	// VKError fails every VK API call with its value as the VK error code.
	VKError FaultKind = "vk-error"
	// VKFlood fails messages.send with error 9 (flood control) for its
	// value of conversations: those of the next events to be posted.
	VKFlood FaultKind = "vk-flood"
)

// A faultSpec says what one FaultKind acts on and what its value is.
type faultSpec struct {
	redis bool
	// channel groups the kinds that set one switch: two faults on one
	// channel must not overlap.
	channel string
	// value is what "=VALUE" is: "" (none allowed), "duration", "code" or
	// "count"; def is the value when it is left out ("" = required).
	value, def string
	help       string
}

var faultSpecs = map[FaultKind]faultSpec{
	RedisStall:   {redis: true, channel: "redis connections", help: "hold every byte to and from Redis, connections kept open"},
	RedisCut:     {redis: true, channel: "redis connections", help: "close every connection to Redis and refuse new ones"},
	RedisLatency: {redis: true, channel: "redis latency", value: "duration", help: "=D: delay each chunk to and from Redis by D"},
	VKDown:       {channel: "vk api", help: "close every VK API request's connection unanswered"},
	VKBadGateway: {channel: "vk api", help: "answer every VK API request 502 with an HTML page"},
	VKHang:       {channel: "vk api", help: "hold every VK API request unanswered until the fault ends"},
	VKError:      {channel: "vk api", value: "code", def: "10", help: "[=CODE]: fail every VK API call with error CODE (default 10)"},
	VKFlood:      {channel: "vk flood", value: "count", def: "1", help: "[=N]: error 9 for every send to N conversations (default 1)"},
}

// FaultHelp lists the fault kinds, one per line, for a command's help.
func FaultHelp() string {
	kinds := make([]string, 0, len(faultSpecs))
	for k := range faultSpecs {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-14s %s\n", k, faultSpecs[FaultKind(k)].help)
	}
	return b.String()
}

// A Fault is one fault of a run's schedule: Kind from At after the first
// event is posted, for For.
type Fault struct {
	Kind    FaultKind
	At, For time.Duration
	// Latency is the delay of RedisLatency.
	Latency time.Duration
	// Code is the VK error code of VKError.
	Code int
	// Peers is how many conversations VKFlood floods.
	Peers int
}

// Redis reports whether f acts on the bot's Redis (through the proxy).
func (f Fault) Redis() bool { return faultSpecs[f.Kind].redis }

// End is when f ends, from the run's start.
func (f Fault) End() time.Duration { return f.At + f.For }

// String writes f in the syntax ParseFaults reads.
func (f Fault) String() string {
	s := fmt.Sprintf("%s@%v+%v", f.Kind, f.At, f.For)
	switch faultSpecs[f.Kind].value {
	case "duration":
		s += "=" + f.Latency.String()
	case "code":
		s += "=" + strconv.Itoa(f.Code)
	case "count":
		s += "=" + strconv.Itoa(f.Peers)
	}
	return s
}

// ParseFaults reads a fault schedule: comma-separated faults, each
// KIND@START+DURATION[=VALUE], START and DURATION as Go durations (2s,
// 1.5s, 500ms) counted from the first event posted. For example
// "redis-stall@2s+10s,vk-down@5s+12s,redis-latency@1s+5s=50ms". Faults that
// set the same switch (a Redis stall and cut; the VK outages and errors)
// must not overlap. An empty string is no faults.
func ParseFaults(s string) ([]Fault, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var faults []Fault
	for _, item := range strings.Split(s, ",") {
		f, err := parseFault(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", item, err)
		}
		faults = append(faults, f)
	}
	if len(faults) > MaxFaults {
		return nil, fmt.Errorf("%d faults: at most %d", len(faults), MaxFaults)
	}
	slices.SortStableFunc(faults, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	for i, a := range faults {
		for _, b := range faults[i+1:] {
			if faultSpecs[a.Kind].channel == faultSpecs[b.Kind].channel && b.At < a.End() {
				return nil, fmt.Errorf("faults %s and %s overlap; both set the %s", a, b, faultSpecs[a.Kind].channel)
			}
		}
	}
	return faults, nil
}

func parseFault(s string) (Fault, error) {
	kind, rest, ok := strings.Cut(s, "@")
	if !ok {
		return Fault{}, errors.New("want KIND@START+DURATION[=VALUE], e.g. redis-stall@2s+10s")
	}
	f := Fault{Kind: FaultKind(kind)}
	spec, known := faultSpecs[f.Kind]
	if !known {
		return Fault{}, fmt.Errorf("unknown kind %q; the kinds are:\n%s", kind, FaultHelp())
	}
	when, value, hasValue := strings.Cut(rest, "=")
	at, length, ok := strings.Cut(when, "+")
	if !ok {
		return Fault{}, errors.New("want START+DURATION after @, e.g. @2s+10s")
	}
	var err error
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return Fault{}, fmt.Errorf("start %q: want a duration of 0s or more", at)
	}
	if f.For, err = time.ParseDuration(length); err != nil || f.For <= 0 {
		return Fault{}, fmt.Errorf("duration %q: want a positive duration", length)
	}
	if f.End() > MaxFaultEnd {
		return Fault{}, fmt.Errorf("ends at %v: faults must end within %v of the start", f.End(), MaxFaultEnd)
	}
	if hasValue && spec.value == "" {
		return Fault{}, fmt.Errorf("%s takes no =VALUE", kind)
	}
	if !hasValue {
		if spec.value != "" && spec.def == "" {
			return Fault{}, fmt.Errorf("%s needs =VALUE (%s)", kind, spec.help)
		}
		value = spec.def
	}
	switch spec.value {
	case "duration":
		if f.Latency, err = time.ParseDuration(value); err != nil || f.Latency <= 0 || f.Latency > MaxFaultLatency {
			return Fault{}, fmt.Errorf("latency %q: want a duration above 0 and at most %v", value, MaxFaultLatency)
		}
	case "code":
		if f.Code, err = strconv.Atoi(value); err != nil || f.Code <= 0 {
			return Fault{}, fmt.Errorf("error code %q: want a positive VK error code", value)
		}
	case "count":
		if f.Peers, err = strconv.Atoi(value); err != nil || f.Peers <= 0 || f.Peers > MaxFloodPeers {
			return Fault{}, fmt.Errorf("conversations %q: want 1 to %d", value, MaxFloodPeers)
		}
	}
	return f, nil
}

// A FaultRecord is one fault as it was applied: when, from the run's
// start, it began and ended, and what it hit.
type FaultRecord struct {
	Fault string `json:"fault"`
	// Began and Ended are offsets from the run's start: the fault was in
	// force (wholly applied) from Began until Ended (just before it was
	// lifted); Ended is zero if the fault never began.
	Began time.Duration `json:"-"`
	Ended time.Duration `json:"-"`
	// Detail names what a fault hit, such as the flooded peers.
	Detail string `json:"detail,omitempty"`
}

// MarshalJSON writes the times in seconds.
func (f FaultRecord) MarshalJSON() ([]byte, error) {
	type plain FaultRecord
	return json.Marshal(struct {
		plain
		Began float64 `json:"began_s"`
		Ended float64 `json:"ended_s"`
	}{plain(f), round3(f.Began.Seconds()), round3(f.Ended.Seconds())})
}

// A faultInjector applies a run's fault schedule to the Redis proxy and the
// fake VK API.
type faultInjector struct {
	proxy *faultproxy.Proxy
	vk    *vktest.Server
	// peers returns the conversations of the next n events to be posted.
	peers func(n int) []int
}

// run applies every fault at its time from start and ends it after its
// duration. When ctx ends, the faults in force end at once and the ones
// not begun are skipped. It returns what was applied, in schedule order.
func (fi *faultInjector) run(ctx context.Context, start time.Time, faults []Fault) []FaultRecord {
	type step struct {
		at    time.Duration
		i     int
		begin bool
	}
	var steps []step
	for i, f := range faults {
		steps = append(steps, step{f.At, i, true}, step{f.End(), i, false})
	}
	// Ends before begins at the same moment, so back-to-back faults on one
	// switch hand over cleanly.
	slices.SortStableFunc(steps, func(a, b step) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.begin == b.begin {
			return 0
		}
		if a.begin {
			return 1
		}
		return -1
	})
	records := make([]FaultRecord, len(faults))
	ends := make([]func(), len(faults)) // set while a fault is in force
	for i, f := range faults {
		records[i].Fault = f.String()
	}
	for _, s := range steps {
		if wait := time.Until(start.Add(s.at)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		if s.begin {
			var detail string
			ends[s.i], detail = fi.begin(faults[s.i])
			records[s.i].Began = time.Since(start)
			records[s.i].Detail = detail
		} else if end := ends[s.i]; end != nil {
			records[s.i].Ended = time.Since(start)
			end()
			ends[s.i] = nil
		}
	}
	for i, end := range ends { // interrupted: end what is in force
		if end != nil {
			records[i].Ended = time.Since(start)
			end()
		}
	}
	return records
}

// begin applies f and returns the function that ends it, and what it hit.
func (fi *faultInjector) begin(f Fault) (end func(), detail string) {
	p, vk := fi.proxy, fi.vk
	outage := func(o vktest.Outage) (func(), string) {
		vk.SetOutage(o)
		return func() { vk.SetOutage(vktest.Up) }, ""
	}
	switch f.Kind {
	case RedisStall:
		p.Stall()
		return p.Resume, ""
	case RedisCut:
		p.Cut()
		return p.Restore, ""
	case RedisLatency:
		p.SetLatency(f.Latency)
		return func() { p.SetLatency(0) }, ""
	case VKDown:
		return outage(vktest.Unreachable)
	case VKBadGateway:
		return outage(vktest.BadGateway)
	case VKHang:
		return outage(vktest.Hang)
	case VKError:
		vk.FailAlways(f.Code)
		return func() { vk.FailAlways(0) }, ""
	case VKFlood:
		peers := fi.peers(f.Peers)
		for _, peer := range peers {
			vk.FailPeer(peer, floodControl, -1)
		}
		if len(peers) == 0 {
			return func() {}, "no events left to post: nobody flooded"
		}
		return func() {
			for _, peer := range peers {
				vk.FailPeer(peer, 0, 0)
			}
		}, "peers " + joinInts(peers)
	}
	panic("loadtest: fault kind " + string(f.Kind) + " has no injector") // ParseFaults admits only known kinds
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// startFaults starts the injector in a goroutine; the returned function
// waits for the schedule to finish (or ctx to end) and returns the records.
func startFaults(ctx context.Context, fi *faultInjector, start time.Time, faults []Fault) func() []FaultRecord {
	if len(faults) == 0 {
		return func() []FaultRecord { return nil }
	}
	var (
		once    sync.Once
		records []FaultRecord
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		records = fi.run(ctx, start, faults)
	}()
	return func() []FaultRecord {
		once.Do(func() { <-done })
		return records
	}
}
