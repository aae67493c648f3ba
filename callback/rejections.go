package callback

import (
	"errors"
	"sync/atomic"
)

// A Reason is why the Handler refused a request (a 4xx answer): Rejected
// counts the refusals by reason.
type Reason uint8

// The reasons, in the order Reasons lists them.
const (
	// WrongSecret: the request named a served community without its
	// secret (a wrong or missing "secret"). From VK itself it means that
	// VK_SECRET differs from the secret key of the community's Callback
	// API settings, and no message reaches the bot.
	WrongSecret Reason = iota
	// UnknownCommunity: the group_id is not one the Handler serves.
	UnknownCommunity
	// NoConfirmation: a confirmation event for a community without a
	// confirmation string.
	NoConfirmation
	// Malformed: the body is not a VK event, or a message lacks what the
	// bot needs (400).
	Malformed
	// TooLarge: the body is over Options.MaxBodyBytes (413).
	TooLarge
	// WrongMethod: not a POST (405).
	WrongMethod
	numReasons
)

// reasons maps each Reason to the error that says it (wrapped by the
// error the request failed with) and its name in /stats and metrics.
var reasons = [numReasons]struct {
	err   error
	label string
}{
	WrongSecret:      {errWrongSecret, "wrong_secret"},
	UnknownCommunity: {errUnknownCommunity, "unknown_community"},
	NoConfirmation:   {errNoConfirmation, "no_confirmation"},
	Malformed:        {errMalformed, "malformed"},
	TooLarge:         {errTooLarge, "too_large"},
	WrongMethod:      {errMethod, "wrong_method"},
}

// The reasons a 403 has, each wrapped with errForbidden.
var (
	errWrongSecret      = errors.New("wrong secret")
	errUnknownCommunity = errors.New("unknown community")
	errNoConfirmation   = errors.New("no confirmation string configured")
)

// Reasons lists every Reason.
func Reasons() []Reason {
	rs := make([]Reason, numReasons)
	for i := range rs {
		rs[i] = Reason(i)
	}
	return rs
}

// String is the reason's name: wrong_secret, unknown_community,
// no_confirmation, malformed, too_large, wrong_method.
func (r Reason) String() string {
	if r >= numReasons {
		return "unknown"
	}
	return reasons[r].label
}

// reasonOf is the reason err says, if it is a refusal.
func reasonOf(err error) (Reason, bool) {
	for r, x := range reasons {
		if errors.Is(err, x.err) {
			return Reason(r), true
		}
	}
	return 0, false
}

// rejections counts refused requests by reason; safe for concurrent use.
type rejections [numReasons]atomic.Int64

func (c *rejections) note(err error) {
	if r, ok := reasonOf(err); ok {
		c[r].Add(1)
	}
}

// Rejected returns how many requests the Handler refused for reason r
// since it was created.
func (h *Handler) Rejected(r Reason) int64 {
	if r >= numReasons {
		return 0
	}
	return h.rejected[r].Load()
}
