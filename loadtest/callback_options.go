package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vkcounter/vkcounter/internal/faultproxy"
	"github.com/vkcounter/vkcounter/vktest"
)

// CallbackOptions configure RunCallback. Zero fields mean the documented
// defaults.
type CallbackOptions struct {
	// URL is the bot's webhook, e.g. http://127.0.0.1:8080/callback.
	// Unused with LongPoll.
	URL string
	// LongPoll delivers the events through the fake VK API's Bots Long
	// Poll server instead of the webhook: the bot runs with VK_MODE=longpoll
	// and VK_API_URL pointing at VK. An event counts as answered "ok" once
	// the bot asks for the events after it (see vktest.LongPollAcked).
	LongPoll bool
	// VK is the fake VK API the bot sends its replies to.
	VK *vktest.Server
	// GroupID (default 1) and Secret are the community as the bot knows it.
	GroupID int
	Secret  string

	// Texts distinct texts are each sent PerText times (defaults 300 and
	// 10: the seed's first scenario; its second is 3000 × 1). Events go
	// round-robin over the texts.
	Texts, PerText int
	// Peers is how many conversations the events come from; zero means one
	// per event, so that every reply is attributed beyond doubt. Every
	// tenth conversation is a group chat. With several events per dialog,
	// replies are told apart by their quote: the bot must quote in dialogs
	// too (REPLY_QUOTE=all, which the command gives a bot it starts).
	Peers int
	// Concurrency is the number of requests in flight (default 10).
	Concurrency int
	// Rate is new events per second; zero means as fast as the bot answers.
	Rate float64
	// Duration stops posting after that long; zero means once every event
	// is posted. Posting also stops before the bot's window runs out, as
	// older events would then leave the window and change the answers.
	Duration time.Duration
	// RetryFraction is the share of events that are posted a second time
	// once answered "ok", with the same event_id and X-Retry-Counter: 1, as
	// VK does when an "ok" is lost. They must be counted once.
	RetryFraction float64
	// NoEventID is the share of events posted without an event_id, as a
	// message can arrive: the bot must recognise their re-deliveries by
	// the message's own identity (group, peer_id,
	// conversation_message_id).
	NoEventID float64

	// Expired, when positive, stores that many occurrences of every text,
	// older than the window, in the bot's Redis before the run, as the
	// seed's fill_redis_expired.php: the run then measures the requests
	// that trim them. It needs Prefill.
	Expired int
	// Prefill stores n occurrences of every text, at distinct seconds
	// ending one second beyond window, where the bot counts them: it must
	// use the bot's own configuration (Redis, key prefix, normalisation,
	// community), as `vkcounter prefill` does.
	Prefill func(ctx context.Context, texts []string, n int, window time.Duration) error
	// Window is the bot's window. Zero means ask the bot (GET StatsURL),
	// or assume 24h if it does not say.
	Window time.Duration
	// StatsURL is the bot's /stats, on its admin address; empty means
	// /stats beside the webhook.
	StatsURL string

	// Wait is how long to wait for the bot to answer before the run; zero
	// means it must answer at once.
	Wait time.Duration
	// Probe makes the run first post one probe message (a text of its
	// own, from a user below the run's) and wait, within Wait but at least
	// a few seconds, for the bot's reply to it at VK: a bot this tool did
	// not start may answer the webhook and send its replies elsewhere
	// (dry-run, another VK_API_URL), and the error then says so rather
	// than the run reporting every answer missing. The probe's text is
	// counted in the bot's Redis like any other.
	Probe bool
	// Timeout bounds each webhook request (default 10s).
	Timeout time.Duration
	// ReplyTimeout bounds the wait for replies after the last event
	// (default 10s).
	ReplyTimeout time.Duration
	// MaxAttempts is how many times an event is posted before it counts
	// as not counted (default 5). Failed attempts are posted again with
	// X-Retry-Counter, as VK re-delivers.
	MaxAttempts int
	// Faults is the fault schedule of the run (see ParseFaults): each is
	// applied at its time from the first event posted, for its duration.
	// The run lasts until posting is done and every fault has ended, then
	// waits ReplyTimeout for the replies. Redis faults need RedisProxy.
	Faults []Fault
	// RedisProxy is a proxy the bot reaches its Redis through, for the
	// Redis faults.
	RedisProxy *faultproxy.Proxy
	// StrictSends makes a reply sent again with the same random_id a
	// problem (RepeatedSend) rather than a resend VK drops: one counted
	// message, one messages.send. It is on whenever Faults are given: the
	// fake VK API's faults never lose an answer to a send it accepted, so
	// a bot never needs to repeat one.
	StrictSends bool

	// AllowRemote permits a webhook outside the loopback range.
	AllowRemote bool
	// Progress, if not nil, receives the live progress line.
	Progress io.Writer
}

func (o *CallbackOptions) setDefaults() {
	setDefault(&o.GroupID, DefaultGroupID)
	setDefault(&o.Texts, DefaultTexts)
	setDefault(&o.PerText, DefaultPerText)
	setDefault(&o.Concurrency, DefaultConcurrency)
	setDefault(&o.Timeout, DefaultTimeout)
	setDefault(&o.ReplyTimeout, DefaultReplyTimeout)
	setDefault(&o.MaxAttempts, DefaultMaxAttempts)
}

// setDefault sets *v to def if it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks o's values, each bad one in an error of its own (they
// are joined), named by its flag as `vkcounter loadtest callback` takes it.
// It is the one check of the options: the command runs it on its flags
// before anything starts, and RunCallback on o once the zero fields have
// their defaults; so 0 is refused where it means nothing of its own (the
// command's flags have their defaults already). Targets outside the
// loopback are refused unless AllowRemote.
func (o *CallbackOptions) Validate() error {
	errs := []error{
		atLeast("group", o.GroupID, 1),
		atLeast("texts", o.Texts, 1),
		atLeast("per-text", o.PerText, 1),
		atLeast("peers", o.Peers, 0), // 0: one per event
		atLeast("concurrency", o.Concurrency, 1),
		firstError(finite("rate", o.Rate), atLeast("rate", o.Rate, 0)), // 0: as fast as possible
		atLeast("duration", o.Duration, 0),                             // 0: until every event is posted
		fraction("retry-fraction", o.RetryFraction),
		fraction("no-event-id", o.NoEventID),
		atLeast("expired", o.Expired, 0),                                             // 0: none
		firstError(atLeast("window", o.Window, 0), wholeSeconds("window", o.Window)), // 0: ask the bot
		atLeast("wait", o.Wait, 0),                                                   // 0: the bot must answer at once
		positive("timeout", o.Timeout),
		positive("reply-timeout", o.ReplyTimeout),
		atLeast("attempts", o.MaxAttempts, 1),
	}
	if n := int64(o.Texts) * int64(o.PerText); n > MaxEvents {
		errs = append(errs, fmt.Errorf("-texts %d × -per-text %d = %d events: at most %d in a run", o.Texts, o.PerText, n, MaxEvents))
	}
	if o.URL != "" {
		errs = append(errs, checkURL("url", o.URL, o.AllowRemote))
	}
	if o.Window == 0 && o.StatsURL != "" { // the window is asked there
		errs = append(errs, checkURL("stats-url", o.StatsURL, o.AllowRemote))
	}
	return errors.Join(errs...)
}

// wholeSeconds refuses a duration of the flag name that is not whole
// seconds.
func wholeSeconds(name string, d time.Duration) error {
	if d%time.Second != 0 {
		return fmt.Errorf("-%s %v: must be whole seconds", name, d)
	}
	return nil
}

// wired checks what RunCallback needs besides valid values: the fake VK
// API, the webhook (unless LongPoll), a prefill for Expired, and a proxy
// for the Redis faults.
func (o *CallbackOptions) wired() error {
	var errs []error
	if o.VK == nil {
		errs = append(errs, errors.New("no fake VK API"))
	}
	if o.URL == "" && !o.LongPoll {
		errs = append(errs, errors.New("no webhook URL"))
	}
	if o.Expired > 0 && o.Prefill == nil {
		errs = append(errs, errors.New("expired occurrences need a prefill into the bot's Redis"))
	}
	for _, f := range o.Faults {
		if _, ok := faultSpecs[f.Kind]; !ok {
			errs = append(errs, fmt.Errorf("fault %s: unknown kind", f))
		} else if f.Redis() && o.RedisProxy == nil {
			errs = append(errs, fmt.Errorf("fault %s: Redis faults need a proxy in front of the bot's Redis", f))
		}
	}
	return errors.Join(errs...)
}
