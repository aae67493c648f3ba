package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
)

// windowRequest is the body of a window hit.
type windowRequest struct {
	// Window is in seconds, 1 to window.MaxWindow.
	Window int64 `json:"window"`
}

// windowHitReply is the answer of a window hit.
type windowHitReply struct {
	Name     string `json:"name"`
	Window   int64  `json:"window"`
	Previous int64  `json:"previous"`
}

// windowCountReply is the answer of a window count.
type windowCountReply struct {
	Name   string `json:"name"`
	Window int64  `json:"window"`
	Count  int64  `json:"count"`
}

func (h *Handler) windowHit(w http.ResponseWriter, r *http.Request) {
	var req windowRequest
	if !decodeBody(w, r, &req) {
		return
	}
	d, err := windowParam(req.Window)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, err := h.stores.Windows.Hit(ctx, name, d)
		return windowHitReply{Name: name, Window: req.Window, Previous: n}, err
	})
}

func (h *Handler) windowCount(w http.ResponseWriter, r *http.Request) {
	secs, ok := querySeconds(w, r, "window", true)
	if !ok {
		return
	}
	d, err := windowParam(secs)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, err := h.stores.Windows.Count(ctx, name, d)
		return windowCountReply{Name: name, Window: secs, Count: n}, err
	})
}

// windowParam converts a window in seconds to a duration, refusing one no
// store accepts before it can overflow the conversion.
func windowParam(secs int64) (time.Duration, error) {
	if secs < 1 || secs > int64(window.MaxWindow/time.Second) {
		return 0, fmt.Errorf("%w: %d seconds, want 1 to %d", window.ErrInvalidWindow, secs, int64(window.MaxWindow/time.Second))
	}
	return time.Duration(secs) * time.Second, nil
}

// uniqueAddRequest is the body of a unique add.
type uniqueAddRequest struct {
	Keys []string `json:"keys"`
}

// uniqueAddReply is the answer of a unique add.
type uniqueAddReply struct {
	Name    string `json:"name"`
	Changed bool   `json:"changed"`
}

// uniqueCountReply is the answer of a unique count of one name.
type uniqueCountReply struct {
	Name     string `json:"name"`
	Estimate int64  `json:"estimate"`
}

// uniqueUnionReply is the answer of a unique count of several names.
type uniqueUnionReply struct {
	Names    []string `json:"names"`
	Estimate int64    `json:"estimate"`
}

func (h *Handler) uniqueAdd(w http.ResponseWriter, r *http.Request) {
	var req uniqueAddRequest
	if !decode(w, r, &req, false, maxUniqueAddBody) {
		return
	}
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		changed, err := h.stores.Uniques.Add(ctx, name, req.Keys)
		return uniqueAddReply{Name: name, Changed: changed}, err
	})
}

func (h *Handler) uniqueCount(w http.ResponseWriter, r *http.Request) {
	h.answer(w, r, func(ctx context.Context, name string) (any, error) {
		n, err := h.stores.Uniques.Count(ctx, name)
		return uniqueCountReply{Name: name, Estimate: n}, err
	})
}

// uniqueUnion estimates the union of the names in ?names=a,b,… (the
// parameter may also be repeated).
func (h *Handler) uniqueUnion(w http.ResponseWriter, r *http.Request) {
	var names []string
	for _, v := range r.URL.Query()["names"] {
		names = append(names, strings.Split(v, ",")...)
	}
	if len(names) == 0 {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("names: want ?names=a,b,… (1 to %d names)", unique.MaxNames))
		return
	}
	h.answer(w, r, func(ctx context.Context, _ string) (any, error) {
		n, err := h.stores.Uniques.Count(ctx, names...)
		return uniqueUnionReply{Names: names, Estimate: n}, err
	})
}
