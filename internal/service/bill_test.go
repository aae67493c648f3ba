package service

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
)

// maxIdleCommandsPerSecond is the idle bill the README promises: the
// commands one idle instance's clients send to Redis (a script is one;
// the commands it runs are not the client's), with the platform probing /readyz and
// /metrics every 15 s, so that two instances stay far inside a plan of
// 500 000 commands a month (2 × 0.05 × 2.6 M s ≈ 260 000).
const maxIdleCommandsPerSecond = 0.05

// monitor is a MONITOR connection to a Redis server: every command any
// other client sends, as the server saw it.
type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

// startMonitor opens a MONITOR connection to addr, closed when t ends.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: c, done: make(chan struct{})}
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR answered %q, %v", line, err)
	}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, strings.TrimSpace(line))
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-m.done })
	return m
}

// take returns the commands seen since the last take.
func (m *monitor) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.lines
	m.lines = nil
	return out
}

// busiestWindow returns the most MONITOR lines whose times (the seconds
// each line begins with) fall in one window of the given length, wherever
// it begins, and the time of the first of them.
func busiestWindow(t *testing.T, lines []string, window time.Duration) (most int, from time.Time) {
	t.Helper()
	times := make([]float64, 0, len(lines))
	for _, l := range lines {
		field, _, _ := strings.Cut(l, " ")
		sec, err := strconv.ParseFloat(field, 64)
		if err != nil {
			t.Fatalf("MONITOR line without its time: %q", l)
		}
		times = append(times, sec)
	}
	sort.Float64s(times)
	for i, j := 0, 0; i < len(times); i++ {
		for j < len(times) && times[j]-times[i] <= window.Seconds() {
			j++
		}
		if j-i > most {
			most, from = j-i, time.UnixMicro(int64(times[i]*1e6))
		}
	}
	return most, from
}

// commandNames counts the commands of MONITOR lines by name.
func commandNames(lines []string) string {
	n := map[string]int{}
	for _, l := range lines {
		if _, cmd, ok := strings.Cut(l, "] \""); ok {
			name, _, _ := strings.Cut(cmd, "\"")
			n[strings.ToUpper(name)]++
		}
	}
	var out []string
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// TestIdleBillWithProbesSoak: an idle service whose /readyz and /metrics are
// asked every 15 s, as Fly.io's checks and a scrape do, sends at most
// maxIdleCommandsPerSecond commands to Redis in any 60 s of 3 minutes
// (3 commands), counted with MONITOR on a server of the test's own (every
// client's commands, the connections' set-up included).
// A soak: 3 idle minutes of the machine's time.
func TestIdleBillWithProbesSoak(t *testing.T) {
	soak.Test(t)
	t.Parallel() // waits 3 minutes
	tg := redistest.OwnServer(t, "--maxmemory-policy", "noeviction")
	a := startApp(t, tg, map[string]string{"COUNTER_ADDR": "127.0.0.1:0"})
	a.MustOK(t, event("warm", 900, 1, "warm-up"))
	a.WaitSends(t, 1)
	a.waitSettled(t)
	a.waitQuiet(t, 1, true) // the message's last acknowledgements and activity batch
	mon := startMonitor(t, tg.Addr)
	mon.take()

	// An idle sender's cycle (a read, and a takeover's step that looks at
	// the replies set aside too: 2 commands) comes every maxPoll (2 min): a
	// window of 3 min holds one or two, whatever their phase. /readyz reads
	// INFO memory every 10 minutes, whatever the cycle's phase: with a
	// cycle, 3 commands in a minute.
	const idle, probeEvery = 3 * time.Minute, 15 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), idle)
	defer cancel()
	start := time.Now()
	for probe := time.NewTicker(probeEvery); ; {
		if code, body := get(t, a.AdminURL("/readyz")); code != 200 {
			t.Errorf("/readyz while idle: %d %s", code, body)
		}
		a.ScrapeMetrics(t)
		select {
		case <-probe.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	var lines, inScripts []string // the clients' commands; those scripts ran
	for _, l := range mon.take() {
		if strings.Contains(l, " lua] ") {
			inScripts = append(inScripts, l)
		} else {
			lines = append(lines, l)
		}
	}
	took := time.Since(start)
	perSecond := float64(len(lines)) / took.Seconds()
	t.Logf("idle %.0fs, /readyz and /metrics every %v: %d commands, %.3f/s: %s (and inside scripts: %s)",
		took.Seconds(), probeEvery, len(lines), perSecond, commandNames(lines), commandNames(inScripts))
	if perSecond > maxIdleCommandsPerSecond {
		t.Errorf("%.3f commands/s idle, want at most %v:\n%s", perSecond, maxIdleCommandsPerSecond, strings.Join(lines, "\n"))
	}
	const window = time.Minute
	most, from := busiestWindow(t, lines, window)
	t.Logf("the busiest %v: %d commands (%.3f/s), from %s", window, most, float64(most)/window.Seconds(), from.UTC().Format("15:04:05.000"))
	if float64(most)/window.Seconds() > maxIdleCommandsPerSecond {
		t.Errorf("%d commands in %v from %s, want at most %.0f:\n%s", most, window, from.UTC().Format("15:04:05.000"),
			maxIdleCommandsPerSecond*window.Seconds(), strings.Join(lines, "\n"))
	}
}
