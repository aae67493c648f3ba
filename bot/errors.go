package bot

import (
	"errors"
	"strconv"

	"github.com/SevereCloud/vksdk/v2/api"
)

// A Class says what the sender does with a reply whose send failed.
type Class int

// The error classes of SPEC §1.3.
const (
	// Delivered: no error.
	Delivered Class = iota
	// Retry: a transient failure (errors 1, 6, 10, network errors, non-JSON
	// answers); retried with exponential backoff.
	Retry
	// Flood: flood control (9); retried once after a long pause, then dropped.
	Flood
	// Drop: a permanent failure for this peer or this request (900, 901,
	// 902, 914, 917, 945, 946, and API errors not listed elsewhere); the
	// reply is dropped with a log line.
	Drop
	// Halt: the token is unusable (5, 7, 29, 912); the token stops sending,
	// keeps its replies, retries rarely, and the service reports not ready.
	Halt
	// Logged: the reply was logged instead of sent (ErrDryRun); it leaves
	// the outbox, but is neither sent nor delivered.
	Logged
)

// ErrDryRun is what the DryRun sender returns for each reply it logged.
var ErrDryRun = errors.New("bot: dry-run: reply logged, not sent")

var classNames = [...]string{Delivered: "delivered", Retry: "retry", Flood: "flood", Drop: "drop", Halt: "halt", Logged: "dry_run"}

// String names the class, for logs and metric labels.
func (c Class) String() string { return classNames[c] }

// vkErrorClasses maps VK API error codes to classes; codes not listed are Drop.
var vkErrorClasses = map[int]Class{
	1: Retry, 6: Retry, 10: Retry,
	9:   Flood,
	900: Drop, 901: Drop, 902: Drop, 914: Drop, 917: Drop, 945: Drop, 946: Drop,
	5: Halt, 7: Halt, 29: Halt, 912: Halt,
}

// Classify tells what to do about err returned by a send.
func Classify(err error) Class {
	if err == nil {
		return Delivered
	}
	if errors.Is(err, ErrDryRun) {
		return Logged
	}
	if code, ok := vkErrorCode(err); ok {
		if c, listed := vkErrorClasses[code]; listed {
			return c
		}
		return Drop
	}
	// Any other failure is a transport or decoding one (a cancelled call,
	// a network error, a proxy's HTML 5xx page): VK may or may not have
	// processed the call; the random_id makes a retry harmless.
	return Retry
}

// callResult is how VKOptions.OnCall names the outcome of a call that
// failed with err (nil: success).
func callResult(err error) string {
	if err == nil {
		return "0"
	}
	if c, ok := vkErrorCode(err); ok {
		return strconv.Itoa(c)
	}
	return "transport"
}

// vkErrorCode returns the VK API error code carried by err, if any.
func vkErrorCode(err error) (int, bool) {
	var ep *api.Error
	if errors.As(err, &ep) {
		return int(ep.Code), true
	}
	var e api.Error
	if errors.As(err, &e) {
		return int(e.Code), true
	}
	var et api.ErrorType
	if errors.As(err, &et) {
		return int(et), true
	}
	return 0, false
}
