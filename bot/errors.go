package bot

import (
	"errors"
	"strconv"

	"github.com/SevereCloud/vksdk/v2/api"
)

// A Class says what the sender does with a reply whose send failed.
type Class int

// The error classes of SPEC §1.3, refined by VK's schema (vkErrors).
const (
	// Delivered: no error.
	Delivered Class = iota
	// Retry: a transient failure (errors 1, 10, 13, 36, 43, network
	// errors, non-JSON answers); the reply is set aside with its own
	// exponential backoff (Options.RetryBase to RetryMax) and retried until
	// VK takes it, its peer's other replies waiting for it, while the token
	// goes on with everyone else's. Error 13 on a whole execute also makes
	// the token's next batches smaller.
	Retry
	// Flood: flood control (9), about one recipient: that peer's replies
	// are set aside, the pause doubling from Options.FloodPause towards
	// Options.FloodMax (VK's hourly horizon) while VK keeps refusing, one
	// reply probing at the end of each; at most outbox.Options.FloodKeep of
	// them are kept, the oldest dropped beyond.
	Flood
	// Drop: a permanent failure for this peer or this request (900, 901,
	// 902, 914, 917, 945, 946 and the other refusals vkErrors lists); the
	// reply is dropped with a log line. A quoted reply refused for its
	// quote (vkError.quote) is sent again without it instead.
	Drop
	// Halt: the token is unusable (5, 27, 29, or 7 when
	// groups.getTokenPermissions confirms the token lacks the messages
	// right); the token stops sending for Options.HaltPause, its replies
	// are set aside (another token of the community may send them), one
	// reply probes at the end of each pause, and the service reports not
	// ready.
	Halt
	// Logged: the reply was logged instead of sent (ErrDryRun); it leaves
	// the outbox, but is neither sent nor delivered.
	Logged
	// Unknown: a VK error code vkErrors does not list. The reply is
	// retried with backoff up to MaxUnknownTries sends, then dropped with
	// a log line; Options.OnReplyDone reports it with this class, so the
	// drop is counted apart from VK's definite refusals.
	Unknown
	// Permission: error 7 (permission denied), which can concern one
	// conversation. The sender asks VK whether the token has the messages
	// right (groups.getTokenPermissions): if it has, only this reply is
	// dropped; if VK confirms it has not, the token halts (Halt); if VK
	// does not say, the reply is retried.
	Permission
	// Paced: too many requests per second (6), about the token's pace: the
	// pace is lowered and the reply goes again in the token's next call,
	// not counted as a try.
	Paced
	// Captcha: VK asks for a captcha (14), which it does after a method's
	// quantity limit for the token. The bot cannot answer one: the token
	// pauses for Options.CaptchaProbe, its replies set aside and kept,
	// then one reply probes; once VK takes it, the rest follow.
	Captcha
	// FloodDropped names, for Options.OnReplyDone, a reply dropped as the
	// oldest of a peer under flood control beyond the replies kept.
	FloodDropped
)

// MaxUnknownTries is how many times a reply is sent while VK answers it
// with error codes not in vkErrors, before it is dropped.
const MaxUnknownTries = 8

// ErrDryRun is what the DryRun sender returns for each reply it logged.
var ErrDryRun = errors.New("bot: dry-run: reply logged, not sent")

var classNames = [...]string{Delivered: "delivered", Retry: "retry", Flood: "flood", Drop: "drop", Halt: "halt", Logged: "dry_run",
	Unknown: "unknown_error", Permission: "permission", Paced: "paced", Captcha: "captcha",
	FloodDropped: "flood_dropped"}

// String names the class, for logs and metric labels.
func (c Class) String() string { return classNames[c] }

// A vkError is what the sender makes of one VK error code, and why.
type vkError struct {
	class Class
	// quote marks a refusal VK's schema ties to the message's quote
	// (forward, reply_to): a quoted reply goes again without its quote,
	// once; an unquoted one is handled by class.
	quote  bool
	reason string
}

// vkErrors is the one table of VK error codes the sender knows, each with
// the description VK's schema gives it (VKCOM/vk-api-schema at commit
// 0efe478f, errors.json; messages/methods.json lists which messages.send
// may answer) and why it gets its class. A code not listed is Unknown.
var vkErrors = map[int]vkError{
	// Transient: nothing about the request or the token; the same send
	// may succeed a moment later (the random_id makes a repeat harmless).
	1:  {Retry, false, "Unknown error occurred: VK's own failure"},
	6:  {Paced, false, "Too many requests per second: the token's pace, lowered for a while; the reply goes in the next call"},
	10: {Retry, false, "Internal server error"},
	13: {Retry, false, "Runtime error occurred during code invocation: a whole execute failed, each of its sends is retried, in smaller batches"},
	36: {Retry, false, "Method execution was interrupted due to timeout"},
	43: {Retry, false, "This section is temporary unavailable"},

	9:  {Flood, false, "Flood control: too many messages to this peer (VK's limit per user is hourly); that peer waits, growing towards an hour"},
	14: {Captcha, false, "Captcha needed: asked after a method's quantity limit; the token pauses and probes, every reply kept"},

	// The token or the community: no reply can go out through it.
	5:  {Halt, false, "User authorization failed: the token is invalid or revoked"},
	27: {Halt, false, "Group authorization failed: the community token is invalid"},
	29: {Halt, false, "Rate limit reached: the method's daily quota for the token"},
	7:  {Permission, false, "Permission to perform this action is denied: for this conversation, unless the token lacks the messages right"},

	// The quote: messages.send's errors about forward and reply_to.
	100: {Drop, true, "One of the parameters specified was missing or invalid: a quoted message may be gone; unquoted, the request itself is wrong"},
	104: {Drop, true, "Not found: for a quoted reply, the quoted message is the one thing looked up"},
	913: {Drop, true, "Too many forwarded messages"},
	921: {Drop, true, "Can't forward these messages"},
	969: {Drop, true, "Message cannot be forwarded"},

	// This recipient or this conversation refuses the message for good.
	15:   {Drop, false, "Access denied: to this conversation; the token goes on"},
	18:   {Drop, false, "User was deleted or banned"},
	900:  {Drop, false, "Can't send messages for users from blacklist"},
	901:  {Drop, false, "Can't send messages for users without permission"},
	902:  {Drop, false, "Can't send messages to this user due to their privacy settings"},
	911:  {Drop, false, "Keyboard format is invalid"},
	912:  {Drop, false, "This is a chat bot feature, change this status in settings: the community's chat-bot feature is off, so chats refuse; private dialogs and the token are unaffected"},
	914:  {Drop, false, "Message is too long"},
	917:  {Drop, false, "You don't have access to this chat"},
	922:  {Drop, false, "You left this chat"},
	925:  {Drop, false, "You are not admin of this chat"},
	932:  {Drop, false, "Your community can't interact with this peer"},
	936:  {Drop, false, "Contact not found"},
	940:  {Drop, false, "Too many posts in messages"},
	943:  {Drop, false, "Cannot use this intent"},
	944:  {Drop, false, "Limits overflow for this intent"},
	945:  {Drop, false, "Chat was disabled"},
	946:  {Drop, false, "Chat not supported"},
	950:  {Drop, false, "Can't send message, reply timed out"},
	962:  {Drop, false, "You can't access donut chat without subscription"},
	985:  {Drop, false, "Cannot write to notifications only groups"},
	987:  {Drop, false, "Need message request"},
	988:  {Drop, false, "Pending message request"},
	1012: {Drop, false, "Writing is disabled for this chat"},
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
		if e, listed := vkErrors[code]; listed {
			return e.class
		}
		return Unknown
	}
	// Any other failure is a transport or decoding one (a cancelled call,
	// a network error, a proxy's HTML 5xx page): VK may or may not have
	// processed the call; the random_id makes a retry harmless.
	return Retry
}

// quoteRefused reports whether VK refused r with err because of its quote:
// a reply that quotes, refused with an error VK's schema ties to forward
// or reply_to. Without the quote it may well be accepted.
func quoteRefused(r Reply, err error) bool {
	code, ok := vkErrorCode(err)
	return ok && vkErrors[code].quote && r.Quoted()
}

// wholeExecuteFailed reports whether err is error 13, a runtime error of
// an execute's code: the call failed as a whole, and a smaller batch may
// not.
func wholeExecuteFailed(err error) bool {
	code, ok := vkErrorCode(err)
	return ok && code == errRuntime
}

// errRuntime is VK's error 13: runtime error during an execute's code.
const errRuntime = 13

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
