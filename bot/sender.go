package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// APIVersion is the VK API version the bot speaks (vksdk defaults to 5.131).
const APIVersion = vkapi.Version

// A Reply is one answer waiting to be sent: the outbox's entry, queued and
// sent as it is. Its RandomID is stored with it: every retry, by any
// instance, sends the same.
type Reply = outbox.Entry

// A Sender delivers replies through one VK token. Send returns one error per
// reply, in order; a nil entry means VK accepted that reply. Each Send is
// one VK call: the bot paces the calls to the token's rate limit, and
// itself sends again without its quote a quoted reply that VK refused for
// its quote.
type Sender interface {
	Send(ctx context.Context, replies []Reply) []error
}

// A TokenChecker is a Sender that can ask VK whether its token may still
// send replies; VKSender is one. The bot asks when VK answers a send with
// error 7 (permission denied), which can concern one conversation only.
type TokenChecker interface {
	// CheckToken returns nil if the token has the messages right, an
	// error wrapping vkapi.ErrTokenRefused if VK refuses it, and any
	// other error if VK did not say.
	CheckToken(ctx context.Context) error
}

// SenderFunc adapts a function to a Sender.
type SenderFunc func(ctx context.Context, replies []Reply) []error

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, replies []Reply) []error { return f(ctx, replies) }

// VKOptions configure a VKSender. Zero fields mean the defaults.
type VKOptions struct {
	// MethodURL is the API base URL; "" means the real VK API.
	MethodURL string
	// Timeout bounds each HTTP call (default 10s; vksdk's client has none).
	Timeout time.Duration
	// OnCall, if set, is called after every API call with its method, its
	// result ("0" on success, the VK error code of a refusal, "transport"
	// when VK gave no answer) and how long it took.
	OnCall func(method, result string, took time.Duration)
}

// VKSender sends replies with vksdk's messages.send through one token.
type VKSender struct {
	vk     *api.VK
	onCall func(method, result string, took time.Duration)
}

var _ Sender = (*VKSender)(nil)

// NewVKSender returns a Sender for token.
func NewVKSender(token string, opts VKOptions) *VKSender {
	vk := vkapi.New(token, vkapi.Options{MethodURL: opts.MethodURL, Timeout: opts.Timeout})
	return &VKSender{vk: vk, onCall: opts.OnCall}
}

// Send makes one VK call: messages.send for one reply, execute with
// messages.send sub-calls for several (up to 25).
func (s *VKSender) Send(ctx context.Context, replies []Reply) []error {
	start := time.Now()
	var errs []error
	method := "messages.send"
	if len(replies) == 1 {
		// Not vksdk's MessagesSend: it adds empty user_ids and peer_ids,
		// which messages.send of API 5.199 does not define (user_ids) or
		// which we do not use (peer_ids).
		var id int
		err := s.vk.RequestUnmarshal("messages.send", &id, sendParams(replies[0]).WithContext(ctx))
		errs = []error{err}
	} else {
		method = "execute"
		errs = s.execute(ctx, replies)
	}
	if s.onCall != nil {
		var callErr error
		for _, e := range errs {
			if e != nil {
				callErr = e
				break
			}
		}
		s.onCall(method, callResult(callErr), time.Since(start))
	}
	return errs
}

// CheckToken asks VK whether the token may send replies
// (vkapi.CheckToken: groups.getTokenPermissions), one more call reported
// to OnCall like every other; it fits tokens.Token.Check.
func (s *VKSender) CheckToken(ctx context.Context) error {
	start := time.Now()
	err := vkapi.CheckToken(ctx, s.vk)
	if s.onCall != nil {
		result := callResult(err)
		if _, coded := vkErrorCode(err); !coded && errors.Is(err, vkapi.ErrTokenRefused) {
			result = "0" // VK answered: the token lacks the messages right
		}
		s.onCall(tokenCheckMethod, result, time.Since(start))
	}
	return err
}

// tokenCheckMethod is the VK method CheckToken calls.
const tokenCheckMethod = "groups.getTokenPermissions"

// A sendArg is one messages.send parameter: a number, or a string when
// str is set.
type sendArg struct {
	name string
	num  int64
	str  string
	isS  bool
}

// sendArgs are the messages.send parameters of r, in a single call and
// inside execute alike (forward is a JSON string in both): exactly those
// VK's schema defines for what is sent (peer_id, message, random_id, and
// forward or reply_to for a quote). It returns them in a, reused.
func sendArgs(a []sendArg, r Reply) []sendArg {
	a = append(a[:0], sendArg{name: "peer_id", num: int64(r.PeerID)}, sendArg{name: "message", str: r.Message, isS: true},
		sendArg{name: "random_id", num: int64(r.RandomID)})
	switch {
	case r.QuoteCMID > 0:
		a = append(a, sendArg{name: "forward", str: forwardParam(r.PeerID, r.QuoteCMID), isS: true})
	case r.ReplyTo > 0:
		a = append(a, sendArg{name: "reply_to", num: int64(r.ReplyTo)})
	}
	return a
}

// sendParams are r's sendArgs as vksdk's parameters.
func sendParams(r Reply) api.Params {
	p := api.Params{}
	for _, a := range sendArgs(nil, r) {
		if a.isS {
			p[a.name] = a.str
		} else {
			p[a.name] = a.num
		}
	}
	return p
}

// appendArgs appends args as a JSON object, an execute sub-call's argument.
func appendArgs(b []byte, args []sendArg) []byte {
	b = append(b, '{')
	for i, a := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), a.name...), '"', ':') // names are plain ASCII
		if a.isS {
			s, _ := json.Marshal(a.str) // a string: cannot fail
			b = append(b, s...)
		} else {
			b = strconv.AppendInt(b, a.num, 10)
		}
	}
	return append(b, '}')
}

// execute sends replies as sub-calls of one execute. VK answers a failed
// sub-call with false in the response array and one execute_errors entry,
// in order; each reply gets its own error.
func (s *VKSender) execute(ctx context.Context, replies []Reply) []error {
	code := make([]byte, 0, 64+128*len(replies))
	code = append(code, "return ["...)
	var args []sendArg
	for i, r := range replies {
		if i > 0 {
			code = append(code, ',')
		}
		args = sendArgs(args, r)
		code = append(appendArgs(append(code, "API.messages.send("...), args), ')')
	}
	code = append(code, "];"...)

	errs := make([]error, len(replies))
	fill := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var results []json.RawMessage
	err := s.vk.ExecuteWithArgs(string(code), api.Params{}.WithContext(ctx), &results)
	var subErrs *api.ExecuteErrors
	switch {
	case errors.As(err, &subErrs):
	case err != nil:
		return fill(err) // the whole call failed
	}
	if len(results) != len(replies) {
		return fill(fmt.Errorf("bot: execute answered %d results for %d sends", len(results), len(replies)))
	}
	next := 0 // the execute_errors entry of the next failed sub-call
	for i, res := range results {
		if string(res) != "false" {
			continue
		}
		if subErrs == nil || next >= len(*subErrs) {
			errs[i] = errors.New("bot: execute sub-call failed without an error entry")
			continue
		}
		e := (*subErrs)[next]
		next++
		errs[i] = &api.Error{Code: api.ErrorType(e.Code), Message: e.Msg}
	}
	return errs
}

// DryRun returns a Sender that logs each reply instead of sending it, and
// reports ErrDryRun for each, so that no reply counts as sent.
func DryRun(log zerolog.Logger) Sender {
	return SenderFunc(func(_ context.Context, replies []Reply) []error {
		errs := make([]error, len(replies))
		for i, r := range replies {
			ev := log.Info().Int("group_id", r.GroupID).Int("peer_id", r.PeerID).Int32("random_id", r.RandomID)
			if r.QuoteCMID > 0 {
				ev = ev.Int("quotes_cmid", r.QuoteCMID)
			} else if r.ReplyTo > 0 {
				ev = ev.Int("reply_to", r.ReplyTo)
			}
			ev.Str("reply", r.Message).Msg("reply (dry-run, not sent)")
			errs[i] = ErrDryRun
		}
		return errs
	})
}
