package callback_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vkcounter/vkcounter/callback"
)

// The community the fixtures in testdata/ are for (see testdata/README.md).
const (
	fixtureGroup        = 218245623
	fixtureSecret       = "Vk7qR2xLmP9sT4wZ"
	fixtureConfirmation = "6b1d4e2f"
)

// fixtureGroups is the configuration most tests run with: the fixtures'
// community, one without a secret or confirmation string, and one whose
// confirmation string looks like a format.
var fixtureGroups = []callback.Group{
	{ID: fixtureGroup, Secret: fixtureSecret, Confirmation: fixtureConfirmation},
	{ID: 2, Secret: ""},
	{ID: 3, Secret: "s3", Confirmation: "%d%s%%%v%!"},
}

// recorder is a MessageHandler that records every message and answers
// with err.
type recorder struct {
	err error

	mu   sync.Mutex // guards msgs and ctxs
	msgs []callback.Message
	ctxs []context.Context
}

func (r *recorder) HandleMessage(ctx context.Context, m callback.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	r.ctxs = append(r.ctxs, ctx)
	return r.err
}

func (r *recorder) messages() []callback.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]callback.Message(nil), r.msgs...)
}

// mustHandler returns a Handler over next; empty opts.Groups means
// fixtureGroups.
func mustHandler(tb testing.TB, next callback.MessageHandler, opts callback.Options) *callback.Handler {
	tb.Helper()
	if opts.Groups == nil {
		opts.Groups = fixtureGroups
	}
	h, err := callback.NewHandler(next, opts)
	if err != nil {
		tb.Fatalf("NewHandler: %v", err)
	}
	return h
}

// fixture returns the contents of testdata/name.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// request is one request to send to a handler.
type request struct {
	method string // "" means POST
	body   string
	header http.Header
}

func (rq request) build() *http.Request {
	method := rq.method
	if method == "" {
		method = http.MethodPost
	}
	r := httptest.NewRequest(method, "/callback", strings.NewReader(rq.body))
	r.Header.Set("Content-Type", "application/json")
	for k, vs := range rq.header {
		r.Header[k] = vs
	}
	return r
}

// serve sends rq to h and returns the response.
func serve(h http.Handler, rq request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, rq.build())
	return w
}

// replace returns s with old replaced by new, failing if old is absent.
func replace(tb testing.TB, s, old, new string) string {
	tb.Helper()
	if !strings.Contains(s, old) {
		tb.Fatalf("%q not found in fixture", old)
	}
	return strings.Replace(s, old, new, 1)
}

// logLines splits a JSON-lines log into its lines.
func logLines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// hugeMessage returns a valid message_new body for the fixtures' community
// that is at least size bytes long.
func hugeMessage(size int) []byte {
	object := `{"message":{"peer_id":10,"from_id":10,"text":"` + strings.Repeat("a", size) + `"}}`
	return []byte(event("message_new", fixtureGroup, fixtureSecret, object))
}
