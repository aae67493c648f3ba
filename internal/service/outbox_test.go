package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/loadtest"
)

// TestVKFailingThenRecovering: while VK answers error 10 or times out,
// replies wait in the outbox; afterwards all arrive, none lost or doubled.
func TestVKFailingThenRecovering(t *testing.T) {
	for _, fault := range []string{"error 10", "timeout"} {
		t.Run(fault, func(t *testing.T) {
			a := startApp(t, nil, map[string]string{"VK_TIMEOUT": "100ms"})
			switch fault {
			case "error 10":
				a.VK.FailAlways(10)
			case "timeout":
				a.VK.SetDelay(time.Second)
			}
			p := servicetest.NewPoster(a.URL("/callback"))
			for i := range 200 {
				if !p.Post(1+i, fmt.Sprintf("t%d", i%5), 0) {
					t.Fatalf("event %d not answered ok", i)
				}
			}
			// VK keeps failing for a while: the senders have asked it
			// again after a failure, and nothing was delivered.
			eventually.True(t, 20*time.Second, "VK asked again after a failure", func() bool {
				return a.VK.Calls("messages.send")+a.VK.Calls("execute") >= 3
			})
			if n := len(a.VK.Messages()); n != 0 {
				t.Fatalf("%d messages delivered while VK fails", n)
			}
			a.VK.FailAlways(0)
			a.VK.SetDelay(0)
			p.CheckExactlyOnce(t, a.VK)
		})
	}
}

// An aofRedis is a Redis server that fsyncs every write to its append-only
// file, on a free loopback port; restart kills it with SIGKILL and starts
// it again on the same port and files.
type aofRedis struct {
	dir  string
	port string
	cmd  *exec.Cmd
}

func startAOFRedis(t *testing.T) *aofRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.EnvRequire) == "1" {
			t.Fatalf("redis-server not found but %s=1", redistest.EnvRequire)
		}
		t.Skip("redis-server not installed")
	}
	_, port, _ := net.SplitHostPort(tcptest.FreeAddr(t))
	r := &aofRedis{dir: t.TempDir(), port: port}
	r.start(t)
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// start starts the server and waits until it accepts a connection.
func (r *aofRedis) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", r.port, "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "")
	r.cmd.Stdout, r.cmd.Stderr = io.Discard, io.Discard
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 4*time.Second, "redis-server on "+r.port+" started, files in "+r.dir, func() error {
		c, err := net.Dial("tcp", "127.0.0.1:"+r.port)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (r *aofRedis) restart(t *testing.T) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
	r.start(t)
}

// TestAOFRedisRestartUnderLoad kills and restarts a persistent Redis while
// the load tool posts events and re-posts, as VK does, those that got no
// ok. The load tool's checker then finds every event counted exactly once
// and answered exactly once.
func TestAOFRedisRestartUnderLoad(t *testing.T) {
	t.Parallel() // mostly waits (the refused events' Retry-After, 5 s): alongside the other waiting tests
	r := startAOFRedis(t)
	a := startApp(t, &redistest.Target{Kind: redistest.Real, URL: "redis://127.0.0.1:" + r.port + "/0"}, nil)
	const texts, perText = 20, 30
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type result struct {
		rep *loadtest.Report
		err error
	}
	loaded := make(chan result, 1)
	go func() {
		rep, err := loadtest.RunCallback(ctx, loadtest.CallbackOptions{
			URL: a.URL("/callback"), VK: a.VK, GroupID: testGroup, Secret: testSecret,
			Texts: texts, PerText: perText, Concurrency: 6, Window: 24 * time.Hour,
			MaxAttempts: 100, ReplyTimeout: 30 * time.Second,
		})
		loaded <- result{rep, err}
	}()
	eventually.True(t, 90*time.Second, "the load reached a third of the events", func() bool {
		return a.bot.bot.Stats().Received >= texts*perText/3
	})
	r.restart(t)
	res := <-loaded
	rep, err := res.rep, res.err
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if !rep.OK() || rep.Check.Checked != texts*perText {
		t.Fatalf("after a Redis restart under load:\n%s", table.String())
	}
	t.Logf("Redis restarted under load:\n%s", table.String())
}

// drainBacklog stores n replies in the outbox, then starts the program with
// one token against a fake VK API enforcing VK's 20 requests/s, and returns
// how long the program took to deliver them all.
func drainBacklog(tb testing.TB, tg *redistest.Target, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	prefix := redistest.Prefix(tb)
	o := outbox.New(tg.Client, outbox.Options{Prefix: prefix, MaxLen: int64(n)})
	if err := o.Init(ctx, testGroup); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		r := outbox.Entry{GroupID: testGroup, PeerID: 1 + i, Message: "0", RandomID: int32(1 + i), Queued: time.Now()}
		if err := o.Add(ctx, r); err != nil {
			tb.Fatal(err)
		}
	}
	start := time.Now()
	a := startApp(tb, tg, map[string]string{"KEY_PREFIX": prefix, "VK_RATE": "20"})
	a.VK.SetRateLimit(20)
	eventually.True(tb, 120*time.Second, fmt.Sprintf("%d replies delivered", n), func() bool { return len(a.VK.Messages()) >= n })
	took := time.Since(start)
	if got := len(a.VK.Messages()); got != n {
		tb.Fatalf("%d messages for %d replies", got, n)
	}
	return took
}

func TestBacklogDrainsUnderVKRateLimit(t *testing.T) {
	t.Parallel() // mostly waits (VK's 20 requests/s): alongside the other waiting tests
	redistest.RunParallel(t, func(t *testing.T, tg *redistest.Target) {
		took := drainBacklog(t, tg, 1000)
		t.Logf("1000 replies drained in %v (%.0f replies/s)", took, 1000/took.Seconds())
	}, redistest.Mini, redistest.Real)
}

// BenchmarkBacklogDrain reports the replies/s one token delivers from a
// backlog of 5000 under VK's 20 requests/s (BENCHMARKS.md).
func BenchmarkBacklogDrain(b *testing.B) {
	tg := redistest.Open(b, redistest.Real)
	for range b.N {
		took := drainBacklog(b, tg, 5000)
		b.ReportMetric(5000/took.Seconds(), "replies/s")
	}
}
