package callback

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/SevereCloud/vksdk/v2/events"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/internal/deadline"
	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// Group is the configuration of one community served by a Handler.
type Group struct {
	// ID is the community id (group_id), > 0.
	ID int
	// Secret is the "secret key" set in the community's Callback API
	// settings; requests must carry it. Empty means no secret is checked.
	Secret string
	// Confirmation is the string VK expects in answer to a confirmation
	// event. Empty means confirmation is refused with 403, unless
	// FetchConfirmation is set; with it, Confirmation is only the code
	// known at start, answered until a fetch succeeds.
	Confirmation string
	// FetchConfirmation, if set, asks VK for the community's confirmation
	// code now (groups.getCallbackConfirmationCode); VK changes it from
	// time to time. Every confirmation event is answered with the code it
	// returns within ConfirmWait, else with the last code it returned (or
	// Confirmation); with neither, 503. It is called at most once at a
	// time per community and, beyond ConfirmFetchBurst calls in a row, at
	// most once per ConfirmFetchEvery.
	FetchConfirmation func(ctx context.Context) (string, error)
}

// Options configure a Handler.
type Options struct {
	// Groups are the communities served: at least one, IDs unique and > 0.
	// Requests for any other group_id are refused with 403.
	Groups []Group
	// MaxBodyBytes limits the request body. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Timeout bounds the handling of one message: when the MessageHandler
	// has not answered by then (Redis stalls), the request gets 503 with
	// Retry-After, well before VK stops waiting and counts a failure. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// BodyTimeout bounds the reading of the request body, from when the
	// handler starts: a client that sends its body slowly (declaring a
	// large one and trickling it) is cut off then, instead of holding its
	// connection and buffer for the server's whole ReadTimeout. Zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// RetryAfter is the delay sent in the Retry-After header of a 503,
	// rounded up to whole seconds. Zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Logger receives rejected requests at warn and failed message
	// handling at error, at most one line per outcome per FailLogEvery
	// (the next line says how many were held back: a flood of bad or
	// forged requests, or a Redis outage, cannot flood the log), and every
	// handled request at debug. The zero Logger logs nothing. Secrets are
	// never logged.
	Logger zerolog.Logger
}

// A Handler is the http.Handler VK posts Callback API events to. It is safe
// for concurrent use; create it with NewHandler.
type Handler struct {
	next       MessageHandler
	groups     map[int]*group // by pointer, so that compare gets a slice of a digest without a heap copy
	maxBody    int64
	timeout    time.Duration
	deadline   *deadline.Shared // of timeout, for a MessageStarter
	bodyTime   time.Duration
	retryAfter string // Retry-After header value, whole seconds
	log        zerolog.Logger
	failLogs   map[string]*ratelog.Logger // by outcome label
	rejected   rejections

	// compare decides whether two secret digests are equal. It is always
	// subtle.ConstantTimeCompare; it is a field so that tests can watch
	// every secret check go through it.
	compare func(x, y []byte) int

	bufs sync.Pool // of *bytes.Buffer, request bodies
}

var _ http.Handler = (*Handler)(nil)

// group is a Group prepared for checking requests.
type group struct {
	// secret is the SHA-256 of Group.Secret. Comparing digests keeps the
	// comparison constant-time in the length of the secret too:
	// subtle.ConstantTimeCompare returns at once on unequal lengths.
	secret       [sha256.Size]byte
	hasSecret    bool
	confirmation string
	follow       *follower // nil: confirmation is the one answer
}

// NewHandler returns a Handler that passes the messages of message_new
// events to h. It fails if h is nil or opts are invalid.
func NewHandler(h MessageHandler, opts Options) (*Handler, error) {
	if f, isFunc := h.(MessageHandlerFunc); h == nil || isFunc && f == nil {
		return nil, errors.New("callback: nil MessageHandler")
	}
	if len(opts.Groups) == 0 {
		return nil, errors.New("callback: no groups configured")
	}
	groups := make(map[int]*group, len(opts.Groups))
	for i, g := range opts.Groups {
		if g.ID <= 0 {
			return nil, fmt.Errorf("callback: group #%d: ID must be > 0, got %d", i+1, g.ID)
		}
		if _, dup := groups[g.ID]; dup {
			return nil, fmt.Errorf("callback: group #%d: duplicate ID %d", i+1, g.ID)
		}
		groups[g.ID] = &group{
			secret:       sha256.Sum256([]byte(g.Secret)),
			hasSecret:    g.Secret != "",
			confirmation: g.Confirmation,
		}
		if g.FetchConfirmation != nil {
			groups[g.ID].follow = newFollower(g.FetchConfirmation, g.Confirmation,
				opts.Logger.With().Int("group_id", g.ID).Logger())
		}
	}

	maxBody := opts.MaxBodyBytes
	switch {
	case maxBody < 0:
		return nil, fmt.Errorf("callback: MaxBodyBytes must not be negative, got %d", maxBody)
	case maxBody == 0:
		maxBody = DefaultMaxBodyBytes
	}
	timeout := opts.Timeout
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("callback: Timeout must not be negative, got %v", timeout)
	case timeout == 0:
		timeout = DefaultTimeout
	}
	bodyTime := opts.BodyTimeout
	switch {
	case bodyTime < 0:
		return nil, fmt.Errorf("callback: BodyTimeout must not be negative, got %v", bodyTime)
	case bodyTime == 0:
		bodyTime = DefaultBodyTimeout
	}
	retryAfter := opts.RetryAfter
	switch {
	case retryAfter < 0:
		return nil, fmt.Errorf("callback: RetryAfter must not be negative, got %v", retryAfter)
	case retryAfter == 0:
		retryAfter = DefaultRetryAfter
	}
	retrySeconds := int64(retryAfter / time.Second)
	if retryAfter%time.Second != 0 {
		retrySeconds++
	}

	failLogs := map[string]*ratelog.Logger{}
	for _, label := range Outcomes() {
		failLogs[label] = ratelog.New(opts.Logger, FailLogEvery)
	}
	return &Handler{
		next:       h,
		groups:     groups,
		maxBody:    maxBody,
		timeout:    timeout,
		deadline:   deadline.NewShared(timeout),
		bodyTime:   bodyTime,
		retryAfter: strconv.FormatInt(retrySeconds, 10),
		log:        opts.Logger,
		failLogs:   failLogs,
		compare:    subtle.ConstantTimeCompare,
		bufs:       sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}, nil
}

// Classes of failed requests. Every error ServeHTTP answers with wraps
// exactly one of them; outcomes maps it to the response.
var (
	errMethod    = errors.New("method not allowed")
	errTooLarge  = errors.New("request body too large")
	errMalformed = errors.New("bad request")
	errForbidden = errors.New("forbidden")
	// errNotConfirmed: the handler could not confirm the message counted
	// in time; it may still be counted by a late answer, and VK's
	// re-delivery is then recognised.
	errNotConfirmed = errors.New("message not confirmed, retry later")
)

// outcomes maps each class of failure to its status and to its name in
// metrics (Outcome). A public class shows the wrapped error's text to the
// sender; the others show only the class, since their details (a secret
// check, a storage error) are not the sender's business.
var outcomes = []struct {
	class  error
	status int
	public bool
	label  string
}{
	{errMethod, http.StatusMethodNotAllowed, false, "method_not_allowed"},
	{errTooLarge, http.StatusRequestEntityTooLarge, false, "too_large"},
	{errMalformed, http.StatusBadRequest, true, "bad_request"},
	{errForbidden, http.StatusForbidden, false, "forbidden"},
	{errNotConfirmed, http.StatusServiceUnavailable, false, "unavailable"},
}

// Outcomes lists every name Outcome can return, for metrics to declare.
func Outcomes() []string {
	names := []string{"ok"}
	for _, o := range outcomes {
		names = append(names, o.label)
	}
	return append(names, "other")
}

// Outcome names the outcome of a webhook response with status, from the
// handler's own table: "ok" for 200, a failure class's name, or "other".
func Outcome(status int) string {
	if status == http.StatusOK {
		return "ok"
	}
	for _, o := range outcomes {
		if o.status == status {
			return o.label
		}
	}
	return "other"
}

// event is what a request is known to be about, for logging.
type event struct {
	typ     events.EventType
	groupID int
	eventID string
	retry   int
}

// ServeHTTP handles one Callback API request. See the package comment for
// the responses.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev := event{retry: retryCounter(r.Header)}
	if err := h.serve(w, r, &ev); err != nil {
		h.fail(w, r, &ev, err)
		return
	}
	h.log.Debug().Str("type", string(ev.typ)).Int("group_id", ev.groupID).
		Str("event_id", ev.eventID).Int("retry", ev.retry).Int("status", http.StatusOK).
		Msg("callback: request handled")
}

// serve does the work of ServeHTTP, filling in ev as it learns about the
// event. It writes the response on success; on error the caller does.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, ev *event) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fmt.Errorf("%w: %s", errMethod, r.Method)
	}
	d := getDecoder()
	defer d.release()
	env, err := h.readEnvelope(w, r, d)
	if err != nil {
		return err
	}
	ev.typ, ev.groupID, ev.eventID = env.typ, env.groupID, env.eventID

	g, ok := h.groups[env.groupID]
	if !ok {
		return fmt.Errorf("%w: %w: group_id %d is not configured", errForbidden, errUnknownCommunity, env.groupID)
	}
	if g.hasSecret {
		if h.compare(d.secretDigest(), g.secret[:]) != 1 {
			return fmt.Errorf("%w: %w", errForbidden, errWrongSecret)
		}
	}

	switch env.typ {
	case events.EventConfirmation:
		code := g.confirmation
		if g.follow != nil {
			if code, err = g.follow.code(r.Context()); err != nil {
				return fmt.Errorf("%w: group_id %d: %w", errNotConfirmed, env.groupID, err)
			}
		}
		if code == "" {
			return fmt.Errorf("%w: %w for group_id %d", errForbidden, errNoConfirmation, env.groupID)
		}
		writeText(w, code)
	case events.EventMessageNew:
		m, err := d.message(env.object)
		if err != nil {
			return fmt.Errorf("%w: %w", errMalformed, err)
		}
		m.GroupID, m.EventID = env.groupID, env.eventID
		if err := h.handle(r.Context(), m); err != nil {
			return fmt.Errorf("%w: %w", errNotConfirmed, err)
		}
		writeOK(w)
	default:
		// Everything else, "remove" included, is acknowledged and ignored,
		// so that VK does not keep resending it.
		writeOK(w)
	}
	return nil
}

// handle passes m to the MessageHandler, within Timeout and the request's
// context ctx: a MessageStarter's result is waited for here, on the
// deadline the requests of the same moment share.
func (h *Handler) handle(ctx context.Context, m Message) error {
	s, ok := h.next.(MessageStarter)
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, h.timeout)
		defer cancel()
		return h.next.HandleMessage(ctx, m)
	}
	return Await(ctx, h.deadline.Context(), s, m)
}

// readEnvelope reads the body within the size limit and BodyTimeout and
// decodes the event envelope with d. The envelope is valid until d is
// reused. The buffer grows with the bytes received, never ahead of them:
// a declared Content-Length is checked against the limit but not trusted
// with an allocation, so a client declaring a large body and sending a
// few bytes costs a few bytes.
func (h *Handler) readEnvelope(w http.ResponseWriter, r *http.Request, d *decoder) (envelope, error) {
	if r.ContentLength > h.maxBody {
		return envelope{}, fmt.Errorf("%w: Content-Length %d over the limit of %d bytes", errTooLarge, r.ContentLength, h.maxBody)
	}
	// A ResponseWriter without deadlines (a test's recorder) leaves the
	// server's own ReadTimeout in force. The deadline needs no lifting
	// once the body is read: net/http lifts it itself when the body hits
	// EOF, starting the read that watches for the client going away
	// (TestBodyDeadlineLiftedForALongWait); lifting it again cost a timer
	// change per request, 1 % of the service's CPU.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.bodyTime))
	buf := h.bufs.Get().(*bytes.Buffer)
	defer h.putBuffer(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.maxBody)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return envelope{}, fmt.Errorf("%w: over the limit of %d bytes", errTooLarge, h.maxBody)
		}
		return envelope{}, fmt.Errorf("%w: reading body: %w", errMalformed, err)
	}

	env, err := d.decodeEnvelope(buf.Bytes())
	if err != nil {
		return envelope{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	return env, nil
}

func (h *Handler) putBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBuffer {
		return
	}
	buf.Reset()
	h.bufs.Put(buf)
}

// fail answers a request that serve returned err for, logs it once and
// counts a refusal by its reason.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, ev *event, err error) {
	h.rejected.note(err)
	status, text, label := http.StatusInternalServerError, http.StatusText(http.StatusInternalServerError), "other"
	for _, o := range outcomes {
		if errors.Is(err, o.class) {
			status, text, label = o.status, o.class.Error(), o.label
			if o.public {
				text = err.Error()
			}
			break
		}
	}
	line, msg := h.failLogs[label].Warn, "callback: request rejected"
	if status >= http.StatusInternalServerError {
		line, msg = h.failLogs[label].Error, "callback: request failed"
	}
	line().Err(err).Str("type", string(ev.typ)).Int("group_id", ev.groupID).
		Str("event_id", ev.eventID).Int("retry", ev.retry).Int("status", status).
		Str("remote_addr", r.RemoteAddr).Msg(msg)

	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", h.retryAfter)
	}
	http.Error(w, text, status)
}

// writeText writes s verbatim as a 200 plain-text body.
func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", textPlain)
	_, _ = io.WriteString(w, s)
}

// writeOK writes "ok" as a 200 plain-text body without touching the
// header map: net/http gives a body it was not told the type of the type
// it detects, textPlain for "ok" (http.DetectContentType), while a handler
// that asks for the header map has it copied when the status is written
// (two allocations and about 1 KB on every message).
func writeOK(w http.ResponseWriter) {
	_, _ = io.WriteString(w, okBody)
}

// retryCounter reads the X-Retry-Counter header. A missing, malformed or
// negative value counts as a first delivery.
func retryCounter(hdr http.Header) int {
	s := hdr.Get(HeaderRetryCounter)
	if s == "" { // a first delivery: no header, and no error to build
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
