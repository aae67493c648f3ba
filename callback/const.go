package callback

import "time"

// Defaults for the zero fields of Options.
const (
	// DefaultMaxBodyBytes is the body limit used when Options.MaxBodyBytes
	// is zero. VK's largest events (a message with ten attachments and a
	// forwarded thread) stay well below it.
	DefaultMaxBodyBytes int64 = 1 << 20

	// DefaultTimeout is the Options.Timeout used when it is zero: a few
	// seconds, well under the time VK waits for an answer.
	DefaultTimeout = 3 * time.Second

	// DefaultBodyTimeout is the Options.BodyTimeout used when it is zero:
	// VK sends an event's body at once, in one packet or a few.
	DefaultBodyTimeout = 5 * time.Second

	// DefaultRetryAfter is the Retry-After delay used when
	// Options.RetryAfter is zero.
	DefaultRetryAfter = 5 * time.Second
)

// DefaultPath is the path VK posts events to unless the service is told
// another (CALLBACK_PATH).
const DefaultPath = "/callback"

// FailLogEvery is the least time between two log lines of one outcome of
// failed requests (see Options.Logger).
const FailLogEvery = 5 * time.Second

// HeaderRetryCounter is the header in which VK numbers its re-deliveries of
// an event: absent on the first delivery, then 1, 2, ...
const HeaderRetryCounter = "X-Retry-Counter"

// Fixed parts of the responses.
const (
	// okBody is the answer VK expects for every event it should not resend.
	okBody = "ok"

	// textPlain is the Content-Type of "ok" and of confirmation strings.
	textPlain = "text/plain; charset=utf-8"

	// maxPooledBuffer caps the capacity of a body buffer kept for reuse, so
	// one large request does not pin its memory for the life of the pool.
	maxPooledBuffer = 64 << 10
)

// Limits of following VK's confirmation code (Group.FetchConfirmation).
const (
	// ConfirmWait is how long a confirmation event waits for VK's code of
	// now before it is answered with the last code VK gave: VK expects the
	// answer at once, and its API answers in a fraction of a second.
	ConfirmWait = time.Second

	// ConfirmFetchBurst confirmation events in a row each ask VK; beyond
	// them, VK is asked at most once per ConfirmFetchEvery, and the events
	// in between get the last code VK gave. A person confirming a server
	// sends a few; a flood costs the token little.
	ConfirmFetchBurst = 5
	ConfirmFetchEvery = 2 * time.Second
)
