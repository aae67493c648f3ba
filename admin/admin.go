// Package admin is the service's admin surface, served on ADMIN_ADDR and
// testable without a live service: the status page (GET /) and /stats,
// rendered from a typed Snapshot the service fills; /readyz, from the
// service's Readiness checks; the text lookup /texts, over a Counter;
// /healthz and /metrics. It depends on the snapshot's types and the few
// interfaces it reads, never on the command, the settings table or the
// service's insides.
package admin

import (
	"fmt"
	"net/http"

	"github.com/vkcounter/vkcounter/internal/redact"
)

// A Source is the service as the admin surface reads it.
type Source interface {
	// Stats reads the figures /stats serves; it makes no Redis call.
	Stats() Stats
	// Snapshot reads what the status page shows, but its readiness
	// (Snapshot.Reasons, RedisErr: the page reads its Readiness).
	Snapshot() Snapshot
}

// Options are what the admin surface serves.
type Options struct {
	Source    Source
	Readiness *Readiness
	History   *History // the page's charts
	Texts     TextsOptions
	Metrics   http.Handler // /metrics
	// Redactor removes every secret from what is served with free text
	// (the page, /stats, /texts, /readyz); nil removes VK-shaped tokens
	// only.
	Redactor *redact.Redactor
}

// Admin serves the admin surface.
type Admin struct {
	src       Source
	ready     *Readiness
	history   *History
	textsOpts TextsOptions
	textsBusy chan struct{} // one token per /texts request under way (MaxTextsAtOnce)
	metrics   http.Handler
	redact    *redact.Redactor
}

// New returns the admin surface of o; o.Source, o.Readiness, o.History,
// o.Texts.Counter and o.Metrics must be set.
func New(o Options) (*Admin, error) {
	if o.Source == nil || o.Readiness == nil || o.History == nil || o.Texts.Counter == nil || o.Metrics == nil {
		return nil, fmt.Errorf("admin: Source, Readiness, History, Texts.Counter and Metrics are required")
	}
	return &Admin{src: o.Source, ready: o.Readiness, history: o.History, textsOpts: o.Texts,
		textsBusy: make(chan struct{}, MaxTextsAtOnce), metrics: o.Metrics, redact: o.Redactor}, nil
}

// Handler returns the admin routes: the status page at /, /metrics,
// /stats, /texts, /readyz and /healthz. What is served with free text
// (errors, VK's answers, texts) goes out through the Redactor.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics)
	mux.HandleFunc("GET /healthz", Healthz)
	mux.HandleFunc("GET /readyz", a.redacted(a.readyz))
	mux.HandleFunc("GET /stats", a.redacted(a.stats))
	mux.HandleFunc("GET /texts", a.redacted(a.texts))
	mux.HandleFunc("GET /{$}", a.redacted(a.statusPage))
	return mux
}

// Healthz answers "ok": the process serves HTTP.
func Healthz(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }

// redacted serves h's answer without secrets: the whole body is held,
// redacted and written at once.
func (a *Admin) redacted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &heldResponse{header: w.Header(), status: http.StatusOK}
		h(rec, r)
		body := a.redact.Bytes(rec.body)
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.status)
		w.Write(body)
	}
}

// heldResponse is a ResponseWriter that holds the body.
type heldResponse struct {
	header http.Header
	status int
	body   []byte
}

func (h *heldResponse) Header() http.Header  { return h.header }
func (h *heldResponse) WriteHeader(code int) { h.status = code }
func (h *heldResponse) Write(p []byte) (int, error) {
	h.body = append(h.body, p...)
	return len(p), nil
}
