package callback_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vkcounter/vkcounter/callback"
)

// BenchmarkServeHTTP measures the handler alone, with a MessageHandler that
// does nothing, on each fixture.
func BenchmarkServeHTTP(b *testing.B) {
	nop := callback.MessageHandlerFunc(func(context.Context, callback.Message) error { return nil })
	h := mustHandler(b, nop, callback.Options{})
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) { benchmarkServe(b, h, fixture(b, name+".json")) })
	}
}

// BenchmarkVKSDK measures vksdk's own callback handler on the same
// fixtures, as a reference for BenchmarkServeHTTP in the same run.
func BenchmarkVKSDK(b *testing.B) {
	cb, _ := newVKSDK()
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) { benchmarkServe(b, http.HandlerFunc(cb.HandleFunc), fixture(b, name+".json")) })
	}
}

var benchFixtures = []string{
	"message_new_private",
	"message_new_chat",
	"message_new_sticker",
	"message_new_photo",
	"message_new_flat",
	"confirmation",
	"unknown_type",
}

// benchmarkServe posts body to h b.N times, reusing the request and the
// recorder so that only the handler's own work is measured.
func benchmarkServe(b *testing.B, h http.Handler, body []byte) {
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/callback", rd)
	w := &discardWriter{header: http.Header{}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		clear(w.header)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
