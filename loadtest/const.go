package loadtest

import "time"

// This file holds the defaults of the options and every limit and fixed
// value of the load tools.

// Defaults of CallbackOptions.
const (
	DefaultTexts        = 300
	DefaultPerText      = 10
	DefaultConcurrency  = 10
	DefaultTimeout      = 10 * time.Second
	DefaultReplyTimeout = 10 * time.Second
	DefaultMaxAttempts  = 5
	DefaultGroupID      = 1
	// MaxEvents bounds the events of one run (Texts × PerText): each is
	// kept, with its replies, until the run is checked.
	MaxEvents = 1 << 20
)

// Limits of a fault schedule (CallbackOptions.Faults).
const (
	// MaxFaults bounds the faults of one run.
	MaxFaults = 64
	// MaxFaultEnd bounds when the last fault ends, from the run's start.
	MaxFaultEnd = time.Hour
	// MaxFaultLatency bounds the delay of redis-latency.
	MaxFaultLatency = 10 * time.Second
	// MaxFloodPeers bounds the conversations of vk-flood.
	MaxFloodPeers = 1000
	// floodControl is VK's error code for too many messages to one peer.
	floodControl = 9
	// maxRetryAfter caps the Retry-After a re-delivery waits for, as VK
	// bounds its own re-delivery delay.
	maxRetryAfter = time.Minute
)

// Defaults and limits of CountersOptions.
const (
	DefaultConns    = 1
	DefaultDepth    = 1
	DefaultNames    = 1000
	DefaultRequests = 100000
	// MaxConns bounds the connections of one run, and MaxDepth the
	// requests each keeps in flight.
	MaxConns = 10000
	MaxDepth = 100000
	// DefaultCounterTimeout bounds dialing and the wait for each response.
	DefaultCounterTimeout = 5 * time.Second
)

// The simulated VK traffic and the collection of its replies.
const (
	// chatPeerBase is the peer_id of group chat 0; VK numbers chats from
	// 2000000001.
	chatPeerBase = 2000000000
	// userBase is the id of the first simulated user.
	userBase = 100000000
	// chatEvery makes every chatEvery-th conversation a group chat.
	chatEvery = 10
	// pollEvery is how often the fake VK API is read for new replies.
	pollEvery = 10 * time.Millisecond
	// settle is how long the run keeps listening for late (duplicate)
	// replies once every event has one.
	settle = 300 * time.Millisecond
	// maxBackoff caps the pause before posting a failed event again.
	maxBackoff = time.Second
	// headerRetryCounter is the header VK numbers its re-deliveries of an
	// event with (Callback API).
	headerRetryCounter = "X-Retry-Counter"
	// defaultWindow is the bot's documented default WINDOW, assumed when
	// its /stats does not say.
	defaultWindow = 24 * time.Hour
)

// visitKeys is how many participant keys each connection cycles through,
// and visitTimeout the timeout its visits carry, far longer than any run.
const (
	visitKeys    = 100
	visitTimeout = 3600
	// windowSeconds is the window of OpWindowHit, far longer than any run.
	windowSeconds = 86400
)

// acquireMaximum is the maximum sent with every shared Acquire: far above
// what the connections can hold at once, so each one succeeds.
const acquireMaximum = 1 << 30

// maxSamples bounds the samples a series keeps for the latency-over-time
// chart. When full, every other sample is dropped and from then on only
// every stride-th is kept, so the kept ones stay spread evenly in time.
const maxSamples = 20000

// progressEvery is how often the live progress line is rewritten on a
// terminal, plainProgressEvery how often a plain progress line is written
// elsewhere.
const (
	progressEvery      = 250 * time.Millisecond
	plainProgressEvery = 10 * time.Second
)

// maxListed is how many problems of each kind a Report lists; all are
// counted.
const maxListed = 20
