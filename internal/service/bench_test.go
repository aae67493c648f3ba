package service

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// BenchmarkWebhook measures the full webhook path in process — HTTP
// handler, JSON decoding, secret check, the counting script over a real
// connection, queueing the reply — without the network hop of the HTTP
// client. Each request is a new event (unique event_id) for one of 1000
// texts, as redis-benchmark runs the script in BENCHMARKS.md. Replies go to
// the dry-run sender, whose log lines are below the level and cost nothing.
// Each client reuses one request and one response writer, as net/http's
// server reuses its connection's buffers, so that allocs/op counts the
// service's own allocations (httptest's request and recorder cost about
// 16 more per request).
func BenchmarkWebhook(b *testing.B) {
	for _, kind := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run(string(kind), func(b *testing.B) { benchmarkWebhook(b, kind, nil) })
	}
}

// BenchmarkWebhookTopTexts is BenchmarkWebhook on the real Redis without
// and with TOP_TEXTS (100 texts kept, of the 1000 posted): the table is
// fed in the process and adds no Redis command.
func BenchmarkWebhookTopTexts(b *testing.B) {
	for _, n := range []string{"0", "100"} {
		b.Run("top="+n, func(b *testing.B) { benchmarkWebhook(b, redistest.Real, map[string]string{"TOP_TEXTS": n}) })
	}
}

// benchmarkWebhook runs BenchmarkWebhook's loop on a Redis of kind, with
// env added to the service's settings.
func benchmarkWebhook(b *testing.B, kind redistest.Kind, env map[string]string) {
	tg := redistest.Open(b, kind)
	if tg.Mini != nil {
		// As the embedded Redis runs (embedredis: TTLs advanced once a
		// second), not as the tests' miniredis, whose ClockTTL scans and
		// sorts every key on every command (the benchmark's keys need not
		// expire within it).
		tg.Mini.ClockTTL(false)
	}
	vars := map[string]string{"VK_TOKEN": "", "OUTBOX_MAX_LEN": "100000000", "VK_RATE": "1e9", "SHUTDOWN_TIMEOUT": "1s"}
	for k, v := range env {
		vars[k] = v
	}
	a := startApp(b, tg, vars)
	h := a.http.httpSrv.Handler
	bodies := make([][]byte, b.N) // built before the clock starts
	for i := range bodies {
		bodies[i] = event(fmt.Sprintf("bench-%d", i), i%5000+1, i+1, fmt.Sprintf("text %d", i%1000))
	}
	var seq atomic.Int64
	commands := newCommandCounter()
	a.Main.redis.rdb.AddHook(commands)
	b.SetParallelism(25) // 50 clients on 2 cores, as redis-benchmark -c 50
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var body bytes.Reader
		req := httptest.NewRequest(http.MethodPost, "/callback", &body)
		var w reusedWriter
		for pb.Next() {
			body.Reset(bodies[seq.Add(1)-1])
			req.ContentLength = body.Size()
			w.reset()
			h.ServeHTTP(&w, req)
			if w.status != http.StatusOK {
				b.Fatalf("status %d: %s", w.status, w.body.String())
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	// Commands per message, once the senders have taken and
	// acknowledged every reply: all of a message's cost.
	eventually.True(b, time.Minute, "the outbox emptied", func() bool {
		n, err := a.bot.outbox.Len(context.Background(), testGroup)
		return err == nil && n == 0
	})
	a.waitQuiet(b, int64(b.N), false) // the last activity batch: its 5,000 senders added long before
	total, _ := commands.snapshot()
	b.ReportMetric(float64(total)/float64(b.N), "cmds/op")
}

// reusedWriter is an http.ResponseWriter that keeps its header map and
// body buffer from one request to the next.
type reusedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *reusedWriter) reset() {
	if w.header == nil {
		w.header = http.Header{}
	}
	clear(w.header)
	w.status = 0
	w.body.Reset()
}

func (w *reusedWriter) Header() http.Header { return w.header }

func (w *reusedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *reusedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
