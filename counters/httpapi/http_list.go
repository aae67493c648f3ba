package httpapi

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/vkcounter/vkcounter/counters/access"
)

// defaultListLimit is the page size of a listing without ?limit.
const defaultListLimit = 100

// listReply is the answer of a listing of access counters.
type listReply struct {
	Prefix   string      `json:"prefix"`
	Counters []listEntry `json:"counters"`
	// Sum is the sum of this page's totals (at most math.MaxInt64).
	Sum int64 `json:"sum"`
	// Cursor asks for the next page; "" on the last one.
	Cursor string `json:"cursor"`
}

// listEntry is one counter of a listing.
type listEntry struct {
	// Name is the counter's name; JSON shows each byte of a name that is
	// not valid UTF-8 (one created over the port) as U+FFFD.
	Name string `json:"name"`
	// NameBase64 is the exact bytes of a name that is not valid UTF-8,
	// standard base64; absent for the others.
	NameBase64 string `json:"name_base64,omitempty"`
	Total      int64  `json:"total"`
}

// list answers GET /counters/access?prefix=P&limit=N&cursor=C: a page of
// the access counters whose names start with P, in byte order of the
// names. The cursor is opaque (the last name listed, base64url-encoded).
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	lister, ok := h.stores.Access.(access.Lister)
	if !ok {
		writeJSONError(w, http.StatusNotImplemented, "this access counter store cannot list counters (COUNTERS_STORE=file): use redis or memory")
		return
	}
	q := r.URL.Query()
	limit := defaultListLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", q.Get("limit"), access.MaxListLimit))
			return
		}
		limit = n
	}
	after, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: not a cursor this API gave", q.Get("cursor")))
		return
	}
	prefix := q.Get("prefix")
	ctx, cancel := h.storeContext(r)
	defer cancel()
	entries, more, err := lister.List(ctx, prefix, string(after), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rep := listReply{Prefix: prefix, Counters: make([]listEntry, 0, len(entries))}
	for _, e := range entries {
		le := listEntry{Name: e.Name, Total: e.Total}
		if !utf8.ValidString(e.Name) {
			le.NameBase64 = base64.StdEncoding.EncodeToString([]byte(e.Name))
		}
		rep.Counters = append(rep.Counters, le)
		rep.Sum += min(e.Total, math.MaxInt64-rep.Sum)
	}
	if more && len(entries) > 0 {
		rep.Cursor = base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].Name))
	}
	writeJSON(w, http.StatusOK, rep)
}
