// Package prometheus_test loads the alert rules of vkcounter-rules.yml into
// a real Prometheus (Debian's prometheus package), scraping the service
// built from this module, running on a real Redis and the fake VK, and
// drives each fault the rules name: each alert must fire in the outage it
// exists for, and no other. Every Grafana dashboard query must return
// data in the same run.
package prometheus_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/deploy/grafana"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/soak"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

const (
	rulesFile = "vkcounter-rules.yml"
	group     = 42
	secret    = "s3cret"
	// EnvReport, when it names a file, makes the test append there each
	// alert with the fault that fired it (CI prints it).
	EnvReport = "VKCOUNTER_TEST_ALERTS"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// shortRules is the rules file with its waits shortened for a test that
// lasts minutes: every `for:` 3 s, every range 10 s, the replies' age
// threshold 5 s. Each change must find what it changes.
func shortRules(t *testing.T) string {
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, r := range []struct{ re, with string }{
		{`for: \d+m`, "for: 3s"},
		{`\[\d+m\]`, "[10s]"},
		{`\(vkcounter_outbox_oldest_seconds\) > 300`, "(vkcounter_outbox_oldest_seconds) > 5"},
	} {
		re := regexp.MustCompile(r.re)
		if !re.MatchString(s) {
			t.Fatalf("%s: nothing matches %s: update the test's shortening", rulesFile, r.re)
		}
		s = re.ReplaceAllString(s, r.with)
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildService builds cmd/vkcounter into a temporary directory.
func buildService(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "vkcounter")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/vkcounter/vkcounter/cmd/vkcounter").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// service is a running `vkcounter serve`.
type service struct {
	name               string
	loadtest.Listening // from the start-up line
	cmd                *exec.Cmd
	mu                 sync.Mutex
	log                bytes.Buffer
}

// startService runs bin serve with env and waits for its start-up line.
func startService(t *testing.T, name, bin string, env map[string]string) *service {
	s := &service{name: name}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = []string{"HTTP_ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0", "COUNTER_ADDR=off", "LOG_LEVEL=info", "LOG_FORMAT=json", "VK_RATE=1000"}
	for k, v := range env {
		s.cmd.Env = append(s.cmd.Env, k+"="+v)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("%s's log:\n%s", name, s.log.String())
			s.mu.Unlock()
		}
	})
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.log.Write(append(sc.Bytes(), '\n'))
			if l, ok := loadtest.ReadStartUpLine(sc.Bytes()); ok {
				s.Listening = l
				close(up)
			}
			s.mu.Unlock()
		}
	}()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start within 30 s", name)
	}
	return s
}

// post sends a message_new for text to the webhook and returns the status.
func (s *service) post(t *testing.T, id int, text string) int {
	code, err := s.send(id, text)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// send is post for a goroutine of the test's: it returns the error.
func (s *service) send(id int, text string) (int, error) {
	body, _ := json.Marshal(map[string]any{"type": "message_new", "group_id": group, "event_id": fmt.Sprintf("e%d", id), "v": "5.199", "secret": secret,
		"object": map[string]any{"message": map[string]any{"id": id, "date": time.Now().Unix(), "peer_id": 1000 + id%7, "from_id": 1000 + id%7,
			"text": text, "conversation_message_id": id}}})
	resp, err := http.Post("http://"+s.HTTP+"/callback", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// api calls the /counters/ HTTP API and returns the status.
func (s *service) api(t *testing.T, method, path, body string) int {
	req, _ := http.NewRequest(method, "http://"+s.HTTP+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// cnt runs one counter port command with the service's own client.
func (s *service) cnt(t *testing.T, bin string, args ...string) (int, string) {
	out, err := exec.Command(bin, append([]string{"cnt", "-addr", s.Counters}, args...)...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// prom is a running Prometheus.
type prom struct {
	url     string
	targets string // its file_sd targets file
}

// startPrometheus runs Debian's prometheus on the rules, scraping the
// targets every second and evaluating the rules every second.
func startPrometheus(t *testing.T, bin, rules string, targets ...string) *prom {
	dir := t.TempDir()
	p := &prom{url: "http://" + tcptest.FreeAddr(t), targets: filepath.Join(dir, "targets.json")}
	p.setTargets(t, targets...)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: vkcounter
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, rules, p.targets)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(p.url, "http://"), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", log.String())
		}
	})
	eventually.NoError(t, 30*time.Second, "prometheus ready", func() error {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("/-/ready answered %d (its log follows when the test fails)", resp.StatusCode)
		}
		return nil
	})
	return p
}

// setTargets rewrites the scrape targets (Prometheus re-reads the file).
func (p *prom) setTargets(t *testing.T, targets ...string) {
	b, _ := json.Marshal([]map[string]any{{"targets": targets}})
	tmp := p.targets + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.targets); err != nil {
		t.Fatal(err)
	}
}

// get decodes the data of a Prometheus API answer.
func (p *prom) get(t *testing.T, path string, data any) {
	resp, err := http.Get(p.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Status != "success" {
		t.Fatalf("prometheus %s: %v %s", path, err, answer.Error)
	}
	if err := json.Unmarshal(answer.Data, data); err != nil {
		t.Fatal(err)
	}
}

// An alert is one active alert: its name, instance and state.
type alert struct{ name, instance, state string }

func (p *prom) alerts(t *testing.T) []alert {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	p.get(t, "/api/v1/alerts", &data)
	var out []alert
	for _, a := range data.Alerts {
		out = append(out, alert{a.Labels["alertname"], a.Labels["instance"], a.State})
	}
	return out
}

// query returns the values of an instant query.
func (p *prom) query(t *testing.T, q string) []float64 {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &data)
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, _ := strconv.ParseFloat(s, 64)
		out = append(out, v)
	}
	return out
}

// reporter writes each alert with the fault that fired it where CI shows
// it: the terminal (go test shows a passing package's output with -v only)
// or stdout, and the file EnvReport names.
type reporter struct{ lines []string }

func (r *reporter) add(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *reporter) flush(t *testing.T) {
	text := strings.Join(r.lines, "\n") + "\n"
	t.Log("\n" + text)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		io.WriteString(tty, text)
		tty.Close()
	}
	if f := os.Getenv(EnvReport); f != "" {
		out, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		io.WriteString(out, text)
	}
}

// dashboardQueries returns every query of the Grafana dashboard, by panel.
func dashboardQueries(t *testing.T) map[string]string {
	d, err := grafana.Read()
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("%q %s", p.Title, tg.RefID)] = fill.Replace(tg.Expr)
		}
	}
	return out
}

// TestAlertsInRealPrometheusSoak: the project's alert rules (waits shortened),
// in a real Prometheus scraping three live services (callback mode with
// the counter port, long-poll mode, and one whose token VK refuses, added
// for the last fault), each fault fires the alerts that name it and no
// other; half a minute of healthy traffic fires none; every dashboard query returns data.
// A soak: the faults and the alerts' waits last minutes of the machine's time.
func TestAlertsInRealPrometheusSoak(t *testing.T) {
	soak.Test(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(redistest.EnvRequire) == "1" {
			t.Fatalf("prometheus not installed but %s=1 (Debian: apt-get install prometheus)", redistest.EnvRequire)
		}
		line := "deploy/prometheus: skipped the alerts' test against a real Prometheus: prometheus not installed (Debian: apt-get install prometheus)"
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(tty, line)
			tty.Close()
		} else {
			fmt.Println(line)
		}
		t.Skip(line)
	}
	rdb := redistest.OwnServer(t)
	bin := buildService(t)
	rules := shortRules(t)

	// The callback service: the counter port, counters in memory with a
	// cap of 2 names per kind (a third is refused: 0x82, HTTP 507), an
	// outbox of 5 replies, the image's REQUIRE_VK_TOKEN.
	vk := vktest.NewServer()
	defer vk.Close()
	cb := startService(t, "callback", bin, map[string]string{"REDIS_URL": rdb.URL, "KEY_PREFIX": "cb:", "VK_API_URL": vk.MethodURL(),
		"VK_GROUP_ID": strconv.Itoa(group), "VK_TOKEN": "token-1", "VK_SECRET": secret, "VK_CONFIRMATION": "c",
		"REQUIRE_VK_TOKEN": "true", "COUNTER_ADDR": "127.0.0.1:0", "COUNTERS_STORE": "memory", "COUNTERS_MEMORY_MAX_NAMES": "2",
		"OUTBOX_MAX_LEN": "5"})
	// The long-poll service, on a fake VK of its own.
	lpVK := vktest.NewServer()
	defer lpVK.Close()
	lpVK.SetLongPollBatch(10)
	lp := startService(t, "longpoll", bin, map[string]string{"REDIS_URL": rdb.URL, "KEY_PREFIX": "lp:", "VK_API_URL": lpVK.MethodURL(),
		"VK_MODE": "longpoll", "LONGPOLL_WAIT": "1s", "VK_GROUP_ID": strconv.Itoa(group), "VK_TOKEN": "token-lp", "REQUIRE_VK_TOKEN": "true"})
	p := startPrometheus(t, promBin, rules, cb.Admin, lp.Admin)
	var rulesLoaded struct {
		Groups []struct {
			Rules []struct{ Name string } `json:"rules"`
		} `json:"groups"`
	}
	p.get(t, "/api/v1/rules", &rulesLoaded)
	var names []string
	for _, g := range rulesLoaded.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Name)
		}
	}
	if len(names) < 10 {
		t.Fatalf("Prometheus loaded the rules %v, want all ten", names)
	}
	rep := &reporter{}
	rep.add("alerts against a real Prometheus (rules of %s, for: 3s, ranges 10s): each fault, and the alerts it fired", rulesFile)
	defer rep.flush(t)
	instances := map[string]string{cb.Admin: "callback", lp.Admin: "longpoll"}

	// settle is how long a fault goes on once its alerts fired: longer
	// than the rules' shortened for:, so that a wrong alert would fire.
	const settle = 5 * time.Second
	// quiet waits until no alert is pending or firing.
	quiet := func(after string) {
		t.Helper()
		eventually.NoError(t, 90*time.Second, "no alert active "+after, func() error {
			if left := p.alerts(t); len(left) > 0 {
				return fmt.Errorf("still active: %v", left)
			}
			return nil
		})
	}
	// fault runs do, then waits until every alert of want fires, and a
	// few evaluations more; any other alert firing meanwhile is an error.
	// heal ends the fault.
	msg := 0
	fault := func(name string, want []string, do, heal func()) {
		t.Helper()
		start := time.Now()
		do()
		fired := map[string]time.Duration{}
		wrong := map[string]bool{}
		deadline := time.Now().Add(90 * time.Second)
		var settled time.Time // when every alert of want fired
		for settled.IsZero() || time.Since(settled) < settle {
			if settled.IsZero() && len(fired) == len(want) {
				settled = time.Now()
			}
			if time.Now().After(deadline) {
				t.Errorf("fault %q: after 90 s, fired %v, want %v", name, fired, want)
				break
			}
			for _, a := range p.alerts(t) {
				if a.state != "firing" {
					continue
				}
				switch {
				case slices.Contains(want, a.name):
					if _, seen := fired[a.name]; !seen {
						fired[a.name] = time.Since(start)
						rep.add("  %-28s → %s (instance %s) after %.1fs", name, a.name, instances[a.instance], time.Since(start).Seconds())
					}
				case !wrong[a.name+a.instance]:
					wrong[a.name+a.instance] = true
					t.Errorf("fault %q fired %s on %s, which it should not", name, a.name, instances[a.instance])
					rep.add("  %-28s → %s (instance %s): WRONG", name, a.name, instances[a.instance])
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		if heal != nil {
			heal()
		}
		quiet("after " + name)
	}

	// Every target scraped, nothing active: then half a minute of traffic
	// on every path (three times the rules' shortened ranges, ten times
	// their for:), during which no alert may even be pending.
	eventually.True(t, 60*time.Second, "Prometheus scraping both services", func() bool {
		return len(p.query(t, `up{job="vkcounter"} == 1`)) >= 2
	})
	quiet("at start")
	healthyStart := time.Now()
	for i := 0; time.Since(healthyStart) < 30*time.Second; i++ {
		msg++
		if code := cb.post(t, msg, fmt.Sprintf("hello %d", i%3)); code != 200 {
			t.Fatalf("healthy webhook answered %d", code)
		}
		lpVK.QueueEvents(group, json.RawMessage(fmt.Sprintf(`{"type":"message_new","group_id":%d,"event_id":"lp%d","v":"5.199","object":{"message":{"id":%d,"peer_id":7,"from_id":7,"text":"lp","conversation_message_id":%d}}}`, group, i, i+1, i+1)))
		cb.cnt(t, bin, "hit", "pages")
		cb.api(t, "POST", "/counters/access/pages", "")
		cb.api(t, "POST", "/counters/windows/w1", `{"window":60}`)
		for _, a := range p.alerts(t) {
			t.Errorf("healthy run: %s %s on %s", a.name, a.state, instances[a.instance])
		}
		time.Sleep(time.Second)
	}
	rep.add("  %-28s → none (%.0fs of traffic on every path)", "healthy traffic", time.Since(healthyStart).Seconds())
	// Every dashboard query returns data, and a number.
	for where, q := range dashboardQueries(t) {
		vals := p.query(t, q)
		if !slices.ContainsFunc(vals, func(v float64) bool { return !math.IsNaN(v) }) {
			t.Errorf("dashboard panel %s returns no data: %s (%v)", where, q, vals)
		}
	}

	fault("one 0x82 on the counter port", []string{"VkcounterCountersRefused"}, func() {
		cb.cnt(t, bin, "whit", "w2", "60") // the second name: the cap is 2
		if code, out := cb.cnt(t, bin, "whit", "w3", "60"); code == 0 {
			t.Errorf("a third window name was not refused: %s", out)
		}
	}, nil)
	fault("one HTTP 507", []string{"VkcounterCountersRefused"}, func() {
		if code := cb.api(t, "POST", "/counters/windows/w4", `{"window":60}`); code != 507 {
			t.Errorf("a third window name over HTTP: %d, want 507", code)
		}
	}, nil)
	fault("VK refuses a reply (901)", []string{"VkcounterRepliesDropped"}, func() {
		vk.FailNext(901)
		msg++
		cb.post(t, msg, "blocked")
	}, nil)
	fault("VK down, replies waiting", []string{"VkcounterVKFailing", "VkcounterRepliesWaiting", "VkcounterWebhook5xx"}, func() {
		vk.SetOutage(vktest.Unreachable)
		full := 0
		for i := range 8 { // the outbox holds 5: three answered 503 (outbox full)
			msg++
			if cb.post(t, msg, fmt.Sprintf("during the outage %d", i)) == 503 {
				full++
			}
		}
		if full == 0 {
			t.Error("no webhook answered 503 with the outbox full")
		}
	}, func() { vk.SetOutage(vktest.Up) })
	// Redis past its maxmemory (noeviction): it answers, but refuses the
	// counting script with OOM; a webhook a second keeps the refusal fresh.
	var stopPosting func()
	fault("Redis past maxmemory", []string{"VkcounterRedisRefusingWrites", "VkcounterWebhook5xx"}, func() {
		lift := redistest.PastMaxmemory(t, rdb.Client)
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for i := 0; ; i++ {
				if code, err := cb.send(50000+i, fmt.Sprintf("past maxmemory %d", i)); err != nil || code != 503 {
					t.Errorf("a webhook past maxmemory: %d %v, want 503", code, err)
				}
				select {
				case <-done:
					return
				case <-time.After(time.Second):
				}
			}
		}()
		stopPosting = func() { close(done); <-stopped; lift() }
	}, func() { stopPosting() })
	fault("Redis killed", []string{"VkcounterRedisUnreachable"}, func() {
		redistest.StopServer(t, rdb.Addr)
	}, func() { redistest.StartServerAt(t, rdb.Addr) })

	// A service whose token VK refuses (it lacks the messages right),
	// added to the scrape.
	vk.SetTokenMask("token-bad", 262144) // manage only
	bad := startService(t, "refused token", bin, map[string]string{"REDIS_URL": rdb.URL, "KEY_PREFIX": "bad:", "VK_API_URL": vk.MethodURL(),
		"VK_GROUP_ID": strconv.Itoa(group), "VK_TOKEN": "token-bad", "VK_SECRET": secret, "VK_CONFIRMATION": "c", "REQUIRE_VK_TOKEN": "true"})
	instances[bad.Admin] = "refused token"
	fault("a token VK refuses", []string{"VkcounterTokenRefused", "VkcounterNotReady"}, func() {
		p.setTargets(t, cb.Admin, lp.Admin, bad.Admin)
	}, func() { p.setTargets(t, cb.Admin, lp.Admin) })
}
