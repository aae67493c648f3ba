package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// viewKey marks the context of one page view, so that a hook counts the
// Redis commands of the view apart from the traffic's.
type viewKey struct{}

// viewCommands counts the commands sent with a viewKey context, apart
// from those that set up a new connection: go-redis sends them (HELLO,
// CLIENT SETINFO) through the hooks with the context of the call that
// dialled, so whether a view pays them depends on the pool, not the view.
type viewCommands struct{ n atomic.Int64 }

func (c *viewCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *viewCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(ctx, cmd)
		return next(ctx, cmd)
	}
}
func (c *viewCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(ctx, cmds...)
		return next(ctx, cmds)
	}
}

func (c *viewCommands) count(ctx context.Context, cmds ...redis.Cmder) {
	if ctx.Value(viewKey{}) == nil {
		return
	}
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "hello", "client", "auth", "select", "readonly":
		default:
			c.n.Add(1)
		}
	}
}

// steadyTraffic posts rate messages a second to a's webhook, in process,
// until stop is closed: every 10 ms, as many as bring the total to rate
// times the time elapsed (so a late tick catches up). posted says how many
// it posted. Texts repeat over 1,000, senders over 5,000.
func steadyTraffic(b *testing.B, a *app, rate int, stop <-chan struct{}) (posted func() int64, done func()) {
	var n atomic.Int64
	var wg sync.WaitGroup
	h := a.http.httpSrv.Handler
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var body bytes.Reader
		req := httptest.NewRequest(http.MethodPost, "/callback", &body)
		var w reusedWriter
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// At most one second's worth per tick: a service that cannot
			// keep up still stops when told.
			for k := 0; k < rate && n.Load() < int64(time.Since(start).Seconds()*float64(rate)); k++ {
				i := n.Add(1)
				body.Reset(event(fmt.Sprintf("page-%d", i), int(i%5000)+1, int(i), fmt.Sprintf("text %d", i%1000)))
				req.ContentLength = body.Size()
				w.reset()
				h.ServeHTTP(&w, req)
				if w.status != http.StatusOK {
					b.Errorf("webhook status %d: %s", w.status, w.body.String())
					return
				}
			}
		}
	}()
	return n.Load, wg.Wait
}

// BenchmarkStatusPage measures one view of the status page (admin.View,
// what GET / runs, without the HTTP hop) while the service takes 1,000
// messages a second through its webhook, and, as the reference in the
// same run, the /stats document (statsDoc encoded as JSON). It reports
// the page's bytes, the Redis commands one view sends (a hook counts
// those sent with the view's context) and the rate the traffic reached.
func BenchmarkStatusPage(b *testing.B) {
	for _, kind := range []redistest.Kind{redistest.Mini, redistest.Real} {
		b.Run(string(kind), func(b *testing.B) {
			tg := redistest.Open(b, kind)
			a := startApp(b, tg, map[string]string{"VK_TOKEN": "", "OUTBOX_MAX_LEN": "100000000", "SHUTDOWN_TIMEOUT": "1s",
				"COUNTER_ADDR": "127.0.0.1:0"})
			views := &viewCommands{}
			a.Main.redis.rdb.AddHook(views)
			stop := make(chan struct{})
			posted, done := steadyTraffic(b, a, 1000, stop)
			defer func() { close(stop); done() }()
			// The traffic under way: a second's worth of it answered.
			eventually.True(b, time.Minute, "the traffic under way", func() bool { return posted() >= 1000 })
			for _, ref := range []struct {
				name   string
				render func(ctx context.Context, w io.Writer) error
			}{
				{"page", func(ctx context.Context, w io.Writer) error { return a.admin.View(ctx, w, time.Now()) }},
				{"stats", func(_ context.Context, w io.Writer) error { return json.NewEncoder(w).Encode(a.statsDoc()) }},
			} {
				b.Run(ref.name, func(b *testing.B) {
					ctx := context.WithValue(context.Background(), viewKey{}, true)
					var buf bytes.Buffer
					views.n.Store(0)
					from, start := posted(), time.Now()
					b.ReportAllocs()
					for b.Loop() {
						buf.Reset()
						if err := ref.render(ctx, &buf); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(buf.Len()), "bytes/view")
					b.ReportMetric(float64(views.n.Load())/float64(b.N), "redis-cmds/view")
					b.ReportMetric(float64(posted()-from)/time.Since(start).Seconds(), "msgs/s")
				})
			}
		})
	}
}
