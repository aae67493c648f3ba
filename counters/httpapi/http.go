// Package httpapi serves the access, participant, window and unique
// counters of a counters.Stores as JSON under /counters/ (Prefix), with its
// own bearer-token check; Routes is its route table. Store errors are
// classified by counters.StatusOf and answered with the HTTP status of
// that protocol status, so the port and the API never disagree.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/ratelog"
)

// Prefix is the path prefix Handler serves; mount it there:
//
//	mux.Handle(httpapi.Prefix, h)
const Prefix = "/counters/"

// Body limits.
const (
	// maxHTTPBody is the largest request body the handler reads, but for
	// a unique add: a key of participant.MaxKeyLen bytes, each escaped as
	// \uXXXX, fits with room.
	maxHTTPBody = 16 << 10
	// maxUniqueAddBody is the largest body of a unique add: unique.MaxKeys
	// keys of unique.MaxKeyLen bytes, each byte escaped as \uXXXX (6
	// bytes), with their quotes and commas, plus maxHTTPBody for the rest
	// (about 1.5 MiB).
	maxUniqueAddBody = unique.MaxKeys*(6*unique.MaxKeyLen+3) + maxHTTPBody
)

// httpCodes maps the statuses that counters.StatusOf gives store errors to HTTP
// statuses, so that the errors are classified once, in statuses.
var httpCodes = map[wire.Status]int{
	wire.StatusInvalid:       http.StatusBadRequest,
	wire.StatusNotFound:      http.StatusNotFound,
	wire.StatusNotAvailable:  http.StatusConflict,
	wire.StatusStoreFailure:  http.StatusServiceUnavailable,
	wire.StatusOutOfMemory:   http.StatusInsufficientStorage,
	wire.StatusInternalError: http.StatusInternalServerError,
}

// An Handler serves the access, participant, window and unique
// counters as JSON:
//
//	POST /counters/access/{name}                    hit:    {"name":…,"total":…}; optional body {"delta":n}, n >= 1
//	GET  /counters/access/{name}                    total:  {"name":…,"total":…}, 404 if never hit
//	POST /counters/participants/{name}/visit        {"key":…,"timeout":s} → {"name":…,"key":…,"active":…,"new":…}
//	POST /counters/participants/{name}/leave        {"key":…} → {"name":…,"key":…,"active":…,"removed":…}
//	GET  /counters/participants/{name}?timeout=s    {"name":…,"active":…}
//	GET  /counters/access?prefix=P&limit=N&cursor=C {"prefix":P,"counters":[{"name":…,"total":…},…],"sum":…,"cursor":C2}
//	POST /counters/windows/{name}                   {"window":s} → {"name":…,"window":s,"previous":…}
//	GET  /counters/windows/{name}?window=s          {"name":…,"window":s,"count":…}
//	POST /counters/uniques/{name}                   {"keys":[…]} (1 to 1000) → {"name":…,"changed":…}
//	GET  /counters/uniques/{name}                   {"name":…,"estimate":…}, 404 if never added to
//	GET  /counters/uniques?names=a,b,…              {"names":[…],"estimate":…}: the union
//
// A timeout is in whole seconds; 0 or none means the store's default. The
// name is one path segment (escape a "/" in it as %2F); an empty one is a
// 400, and so is a name or query parameter that is not valid UTF-8 (a
// listing shows such a name, created over the port, with U+FFFD for its bad
// bytes and its exact bytes in "name_base64"). A body must be one JSON
// object of valid UTF-8 whose field names are exactly the request's (they
// are case-sensitive) and whose values are not null. Every error is a JSON
// object {"error": "…"}: 400 for a bad name, key, timeout, window, limit,
// cursor or body, 404 for a counter never hit (or
// never added to) or an unknown path, 405 for a wrong method, 409 when a
// total would pass 2^63-1, 413 for a body over 16 KiB (over about 1.5 MiB
// for a unique add, which may carry 1000 keys), 500 for an access counter
// whose count files are all corrupt (the File store; retrying does not
// help), 501 for a listing the store cannot do (the File store), 503 (with
// Retry-After) when the store fails or is slower than counters.Stores.Timeout,
// 507 when a new name would pass a store's cap (the error names it).
//
// It is safe for concurrent use.
type Handler struct {
	stores  counters.Stores
	log     zerolog.Logger
	failLog *ratelog.Logger // store failures, at most one line per counters.StoreFailLogEvery
	mux     *http.ServeMux
	guarded http.Handler // the token check, then route
}

// Options configure an Handler.
type Options struct {
	// Token is the bearer token every request must carry. Empty, the
	// handler answers loopback clients only: the API has no other
	// protection. Every refusal is a 401 saying what to do.
	Token string
	// Logger receives store failures. The zero Logger logs nothing.
	Logger zerolog.Logger
}

var _ http.Handler = (*Handler)(nil)

// New returns a handler serving stores (every one given; pass
// the Server's stores to serve the same counters), or an error if one is
// missing. Requests are checked as opts.Token says.
func New(stores counters.Stores, opts Options) (*Handler, error) {
	stores, err := stores.WithDefaults()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	h := &Handler{stores: stores, log: log, failLog: ratelog.New(log, counters.StoreFailLogEvery), mux: http.NewServeMux()}
	h.guarded = requireToken(opts.Token, http.HandlerFunc(h.route))
	emptyName := func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusBadRequest, "empty counter name")
	}
	for _, kind := range []string{"access", "participants", "windows", "uniques"} {
		h.mux.Handle(Prefix+kind+"/{$}", http.HandlerFunc(emptyName))
	}
	byPattern := map[string]methods{}
	for _, r := range h.routes() {
		if byPattern[r.Pattern] == nil {
			byPattern[r.Pattern] = methods{}
			h.mux.Handle(r.Pattern, byPattern[r.Pattern])
		}
		byPattern[r.Pattern][r.Method] = r.serve
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, "no such counter route: "+r.URL.Path)
	})
	return h, nil
}

// An Route is one route of the API: a method and the pattern it is
// served at, which is what http.Request.Pattern holds for its requests.
type Route struct {
	Method, Pattern string
}

// Routes returns the API's routes, the table Handler serves
// (besides them: 400 for an empty name, 404 for any other path).
func Routes() []Route {
	var h Handler // its handlers are only named, never called
	var out []Route
	for _, r := range h.routes() {
		out = append(out, r.Route)
	}
	return out
}

// A servedRoute is a route with its handler.
type servedRoute struct {
	Route
	serve http.HandlerFunc
}

// routes is the route table with each route's handler.
func (h *Handler) routes() []servedRoute {
	get, post := http.MethodGet, http.MethodPost
	return []servedRoute{
		{Route{get, Prefix + "access/{name}"}, h.total},
		{Route{post, Prefix + "access/{name}"}, h.hit},
		{Route{get, Prefix + "access"}, h.list},
		{Route{get, Prefix + "participants/{name}"}, h.active},
		{Route{post, Prefix + "participants/{name}/visit"}, h.visit},
		{Route{post, Prefix + "participants/{name}/leave"}, h.leave},
		{Route{get, Prefix + "windows/{name}"}, h.windowCount},
		{Route{post, Prefix + "windows/{name}"}, h.windowHit},
		{Route{get, Prefix + "uniques/{name}"}, h.uniqueCount},
		{Route{post, Prefix + "uniques/{name}"}, h.uniqueAdd},
		{Route{get, Prefix + "uniques"}, h.uniqueUnion},
	}
}

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.guarded.ServeHTTP(w, r)
}

// route serves a request the token check let through.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) {
	// An empty path segment (an empty counter name, as in
	// /counters/participants//visit) is refused here: the mux would
	// redirect it to the path without it, a different route.
	if p := r.URL.EscapedPath(); strings.HasPrefix(p, Prefix) && strings.Contains(p[len(Prefix)-1:], "//") {
		writeJSONError(w, http.StatusBadRequest, "empty counter name (an empty path segment)")
		return
	}
	// JSON cannot carry a name that is not UTF-8: the listing would show
	// it with U+FFFD, a name that addresses another counter or none.
	if !utf8.ValidString(r.URL.Path) {
		writeJSONError(w, http.StatusBadRequest, "counter name is not valid UTF-8 (the HTTP API takes UTF-8 names only; use the counter port for other bytes)")
		return
	}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			if !utf8.ValidString(v) {
				writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %s is not valid UTF-8", k))
				return
			}
		}
	}
	h.mux.ServeHTTP(w, r)
}

// methods serves one path: each method with its handler (GET also answers
// HEAD), the others with 405 and an Allow header.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if f, ok := m[method]; ok {
		f(w, r)
		return
	}
	var allow []string
	for k := range m {
		allow = append(allow, k)
		if k == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	slices.Sort(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeJSONError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
}

// accessReply is the answer of hit and total.
type accessReply struct {
	Name  string `json:"name"`
	Total int64  `json:"total"`
}

// addRequest is the optional body of a hit.
type addRequest struct {
	// Delta is what to add, at least 1; absent means 1.
	Delta *int64 `json:"delta"`
}

// hit adds one to the access counter, or the body's delta.
func (h *Handler) hit(w http.ResponseWriter, r *http.Request) {
	var req addRequest
	if !decodeOptionalBody(w, r, &req) {
		return
	}
	if req.Delta == nil {
		h.accessOp(w, r, func(ctx context.Context, name string) (int64, error) { return access.Hit(ctx, h.stores.Access, name) })
		return
	}
	delta := *req.Delta
	h.accessOp(w, r, func(ctx context.Context, name string) (int64, error) {
		return h.stores.Access.Add(ctx, name, delta)
	})
}

func (h *Handler) total(w http.ResponseWriter, r *http.Request) {
	h.accessOp(w, r, h.stores.Access.Total)
}

// accessOp answers a request on the access counter in the path with op.
func (h *Handler) accessOp(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, name string) (int64, error)) {
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		total, err := op(ctx, name)
		return accessReply{Name: name, Total: total}, err
	})
}

// answer calls op with the counter name in the path (empty on a route
// without one) under the store timeout, and answers op's reply with 200,
// or its error as fail does.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, name string) (any, error)) {
	name := r.PathValue("name")
	ctx, cancel := h.storeContext(r)
	defer cancel()
	reply, err := op(ctx, name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// visitRequest is the body of a visit.
type visitRequest struct {
	Key string `json:"key"`
	// Timeout is in seconds; 0 means the store's default.
	Timeout int64 `json:"timeout"`
}

// visitReply is the answer of a visit.
type visitReply struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	Active int    `json:"active"`
	New    bool   `json:"new"`
}

func (h *Handler) visit(w http.ResponseWriter, r *http.Request) {
	var req visitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	timeout, err := timeoutParam(req.Timeout)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, isNew, err := participant.Visit(ctx, h.stores.Participants, name, req.Key, timeout)
		return visitReply{Name: name, Key: req.Key, Active: n, New: isNew}, err
	})
}

// leaveRequest is the body of a leave.
type leaveRequest struct {
	Key string `json:"key"`
}

// leaveReply is the answer of a leave.
type leaveReply struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Active  int    `json:"active"`
	Removed bool   `json:"removed"`
}

func (h *Handler) leave(w http.ResponseWriter, r *http.Request) {
	var req leaveRequest
	if !decodeBody(w, r, &req) {
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, removed, err := h.stores.Participants.Leave(ctx, name, req.Key)
		return leaveReply{Name: name, Key: req.Key, Active: n, Removed: removed}, err
	})
}

// activeReply is the answer of active.
type activeReply struct {
	Name   string `json:"name"`
	Active int    `json:"active"`
}

func (h *Handler) active(w http.ResponseWriter, r *http.Request) {
	secs, ok := querySeconds(w, r, "timeout", false)
	if !ok {
		return
	}
	timeout, err := timeoutParam(secs)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, err := h.stores.Participants.Active(ctx, name, timeout)
		return activeReply{Name: name, Active: n}, err
	})
}

// querySeconds returns the whole seconds in the query parameter key (0 if
// it is absent and not required), or answers 400 and returns false.
func querySeconds(w http.ResponseWriter, r *http.Request, key string, required bool) (int64, bool) {
	q := r.URL.Query()
	if !required && !q.Has(key) {
		return 0, true
	}
	secs, err := strconv.ParseInt(q.Get(key), 10, 64)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want whole seconds", key, q.Get(key)))
		return 0, false
	}
	return secs, true
}

// timeoutParam converts a timeout in seconds to a duration, refusing one
// that no store accepts before it can overflow the conversion.
func timeoutParam(secs int64) (time.Duration, error) {
	if secs < 0 || secs > int64(participant.MaxTimeout/time.Second) {
		return 0, fmt.Errorf("%w: %d seconds, want 0 (default) to %d", participant.ErrInvalidTimeout, secs, int64(participant.MaxTimeout/time.Second))
	}
	return time.Duration(secs) * time.Second, nil
}

// storeContext returns the context of one store call: the request's, ended
// by the store timeout at the latest.
func (h *Handler) storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.stores.Timeout)
}

// fail answers the error of a store call (or of its arguments) with the
// HTTP status of its protocol status.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	err = counters.StoreError(err)
	st, _ := counters.StatusOf(err) // counters.StoreError leaves only known errors
	code, ok := httpCodes[st]
	if !ok {
		code = http.StatusInternalServerError
	}
	msg := err.Error()
	switch st {
	case wire.StatusInternalError:
		// Permanent until an operator repairs the store: no Retry-After.
		h.failLog.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("counter store is damaged")
		msg = st.Message()
	case wire.StatusStoreFailure:
		// The cause (a Redis address, a file path) is for the log, not
		// for the client. A client that went away is no store failure.
		if r.Context().Err() == nil {
			h.failLog.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("counter store failed")
		}
		msg = st.Message()
		w.Header().Set("Retry-After", "1")
	}
	writeJSONError(w, code, msg)
}

// decodeBody decodes the JSON object of r's body into v, or answers 400
// (malformed, empty, unknown field, trailing data) or 413 (over
// maxHTTPBody) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decode(w, r, v, false, maxHTTPBody)
}

// decodeOptionalBody is decodeBody for a body that may be empty, which
// leaves v as it is.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decode(w, r, v, true, maxHTTPBody)
}

func decode(w http.ResponseWriter, r *http.Request, v any, optional bool, limit int64) bool {
	// The whole body is read first: a body over the limit is a 413 whatever
	// it holds, not a 400 for the syntax error the decoder meets first.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", tooBig.Limit))
		return false
	} else if err != nil {
		writeJSONError(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return true
		}
		writeJSONError(w, http.StatusBadRequest, `empty body: want a JSON object like {"key":"…"}`)
		return false
	}
	if err := checkStrict(body, v); err != nil {
		writeJSONError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return false
	}
	return true
}

// checkStrict refuses what encoding/json would let through into v (a
// pointer to a struct): a body that is not valid UTF-8 (the decoder would
// turn its bad bytes into U+FFFD), a top-level value that is not an object
// (null would leave v as it is), a field name that is not exactly one of
// v's json names (the decoder matches them case-insensitively), and null
// anywhere (which would leave a field or an element at its zero value).
// Syntax errors are left to the decoder, which reports them better.
func checkStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return errors.New("not valid UTF-8")
	}
	fields := jsonFields(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(body))
	// open holds the containers the token is in, innermost last; wantKey
	// whether the next token in the innermost object is a field name.
	var open []json.Delim
	wantKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error for the decoder to report
		}
		if len(open) == 0 && tok != json.Delim('{') {
			if tok == nil {
				return errors.New(`null: want a JSON object like {"key":"…"}`)
			}
			return errors.New(`want a JSON object like {"key":"…"}`)
		}
		if name, ok := tok.(string); ok && wantKey {
			if len(open) == 1 && !slices.Contains(fields, name) {
				return fmt.Errorf("unknown field %q (field names are case-sensitive: want %s)", name, strings.Join(fields, ", "))
			}
			wantKey = false
			continue
		}
		switch tok {
		case nil:
			return errors.New("null is no value of any field")
		case json.Delim('{'), json.Delim('['):
			open = append(open, tok.(json.Delim))
			wantKey = tok == json.Delim('{')
			continue
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
		}
		// A value ended: in an object, a field name comes next.
		wantKey = len(open) > 0 && open[len(open)-1] == '{'
	}
}

// jsonFields returns the json field names of the struct type t.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}
