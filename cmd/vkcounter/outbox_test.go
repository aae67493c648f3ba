package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

// poster posts events the way VK does: an event that got no "ok" is posted
// again, with X-Retry-Counter, until it gets one.
type poster struct {
	url string

	mu  sync.Mutex
	ok  map[int]string // peer → text, for every event answered ok
	hit map[string]int // text → events answered ok
}

func newPoster(url string) *poster {
	return &poster{url: url, ok: map[int]string{}, hit: map[string]int{}}
}

// post sends one event once and tells whether it was answered ok.
func (p *poster) post(peer int, text string, retry int) bool {
	req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(string(event(fmt.Sprintf("ev-%d", peer), peer, 1, text))))
	if retry > 0 {
		req.Header.Set("X-Retry-Counter", strconv.Itoa(retry))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		return false
	}
	p.mu.Lock()
	if _, seen := p.ok[peer]; !seen {
		p.ok[peer] = text
		p.hit[text]++
	}
	p.mu.Unlock()
	return true
}

func (p *poster) answered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ok)
}

// checkExactlyOnce asserts that every event answered ok got exactly one
// message at the fake VK API, and that for each text the numbers form
// exactly 0..n-1: every event counted once.
func (p *poster) checkExactlyOnce(t *testing.T, vk *vktest.Server) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	eventually.True(t, time.Minute, "a message for every ok", func() bool { return len(vk.Messages()) >= len(p.ok) })
	perPeer := map[int]int{}
	numbers := map[string][]bool{}
	for _, m := range vk.Messages() {
		perPeer[m.PeerID]++
		text, ok := p.ok[m.PeerID]
		if !ok {
			t.Errorf("message to peer %d, whose event never got ok", m.PeerID)
			continue
		}
		n, err := strconv.Atoi(m.Message)
		if numbers[text] == nil {
			numbers[text] = make([]bool, p.hit[text])
		}
		if err != nil || n < 0 || n >= p.hit[text] || numbers[text][n] {
			t.Errorf("text %q: answer %q is not a new number below %d", text, m.Message, p.hit[text])
			continue
		}
		numbers[text][n] = true
	}
	missing, twice := 0, 0
	for peer := range p.ok {
		switch perPeer[peer] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 {
		t.Errorf("of %d events answered ok: %d got no message, %d got several", len(p.ok), missing, twice)
	}
}

// TestKill9UnderLoad kills the program with SIGKILL while it has replies in
// its outbox, restarts it on the same Redis, and re-posts what got no ok.
// Every event answered ok gets exactly one message.
func TestKill9UnderLoad(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.SetRateLimit(20)                 // VK's limit per token
		vk.SetDelay(100 * time.Millisecond) // and a slow VK: a backlog builds up
		env := map[string]string{
			"REDIS_URL": tg.URL, "KEY_PREFIX": redistest.Prefix(t),
			"VK_API_URL": vk.MethodURL(), "VK_TOKEN": "tok", "VK_GROUP_ID": strconv.Itoa(testGroup),
			"VK_SECRET": testSecret, "VK_RATE": "20", "OUTBOX_CLAIM_AFTER": "1s"}
		first := startBinary(t, env)
		p := newPoster("http://" + first.addr + "/callback")

		const events = 600
		var wg sync.WaitGroup
		failed := make(chan int, events)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < events; i += 6 {
					if !p.post(1+i, fmt.Sprintf("text %d", i%7), 0) {
						failed <- 1 + i
					}
				}
			}()
		}
		// Kill while events are being answered and replies wait.
		eventually.True(t, time.Minute, "a third of the events answered", func() bool { return p.answered() >= events/3 })
		first.cmd.Process.Signal(syscall.SIGKILL)
		<-first.done
		wg.Wait()
		close(failed)
		delivered := len(vk.Messages())
		t.Logf("killed with %d events answered ok, %d messages delivered", p.answered(), delivered)
		if delivered >= p.answered() {
			t.Fatalf("no backlog at the kill (%d delivered of %d): the test proves nothing", delivered, p.answered())
		}

		second := startBinary(t, env)
		p.url = "http://" + second.addr + "/callback"
		for peer := range failed { // VK re-delivers what got no ok
			retry := 0
			eventually.True(t, 10*time.Second, fmt.Sprintf("event of peer %d answered ok", peer), func() bool {
				retry++
				return p.post(peer, fmt.Sprintf("text %d", (peer-1)%7), retry)
			})
		}
		if p.answered() != events {
			t.Fatalf("%d of %d events answered ok", p.answered(), events)
		}
		p.checkExactlyOnce(t, vk)
	}, redistest.Mini, redistest.Real)
}

// TestVKFailingThenRecovering: while VK answers error 10 or times out,
// replies wait in the outbox; afterwards all arrive, none lost or doubled.
func TestVKFailingThenRecovering(t *testing.T) {
	for _, fault := range []string{"error 10", "timeout"} {
		t.Run(fault, func(t *testing.T) {
			a := startApp(t, nil, map[string]string{"VK_TIMEOUT": "100ms"})
			switch fault {
			case "error 10":
				a.vk.FailAlways(10)
			case "timeout":
				a.vk.SetDelay(time.Second)
			}
			p := newPoster(a.url("/callback"))
			for i := range 200 {
				if !p.post(1+i, fmt.Sprintf("t%d", i%5), 0) {
					t.Fatalf("event %d not answered ok", i)
				}
			}
			// VK keeps failing for a while: the senders have asked it
			// again after a failure, and nothing was delivered.
			eventually.True(t, 20*time.Second, "VK asked again after a failure", func() bool {
				return a.vk.Calls("messages.send")+a.vk.Calls("execute") >= 3
			})
			if n := len(a.vk.Messages()); n != 0 {
				t.Fatalf("%d messages delivered while VK fails", n)
			}
			a.vk.FailAlways(0)
			a.vk.SetDelay(0)
			p.checkExactlyOnce(t, a.vk)
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
	_, port, _ := net.SplitHostPort(freePort(t))
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
			URL: a.url("/callback"), VK: a.vk, GroupID: testGroup, Secret: testSecret,
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
	a.vk.SetRateLimit(20)
	eventually.True(tb, 120*time.Second, fmt.Sprintf("%d replies delivered", n), func() bool { return len(a.vk.Messages()) >= n })
	took := time.Since(start)
	if got := len(a.vk.Messages()); got != n {
		tb.Fatalf("%d messages for %d replies", got, n)
	}
	return took
}

func TestBacklogDrainsUnderVKRateLimit(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
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
