package service

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// TestCountersAPIWithoutTokenLoopbackOnly: with no COUNTERS_HTTP_TOKEN the
// /counters/ API answers a client on loopback and refuses (401, saying to
// set the token) one that comes from another address.
func TestCountersAPIWithoutTokenLoopbackOnly(t *testing.T) {
	ip := tcptest.HostIP(t)
	a := startApp(t, nil, map[string]string{"HTTP_ADDR": "0.0.0.0:0", "COUNTER_ADDR": "127.0.0.1:0"})
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	get := func(host string) (int, string) {
		resp, err := http.Post("http://"+net.JoinHostPort(host, port)+"/counters/access/pages", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, body := get(ip.String()); code != 401 || !strings.Contains(body, "COUNTERS_HTTP_TOKEN") {
		t.Errorf("from %s: %d %s; want 401 naming COUNTERS_HTTP_TOKEN", ip, code, body)
	}
	if code, body := get("127.0.0.1"); code != 200 || body != `{"name":"pages","total":1}`+"\n" {
		t.Errorf("from loopback: %d %s; want 200 and the first hit", code, body)
	}
	a.mustTotal(t, "pages", 1) // the refused hit changed nothing
}

// TestAdminEndpointsNotPublic: /metrics, /stats and /readyz are served on
// ADMIN_ADDR only; the public server has the webhook, /counters/ and
// /healthz.
func TestAdminEndpointsNotPublic(t *testing.T) {
	a := startApp(t, nil, nil)
	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/metrics", "/stats", "/readyz"} {
		if got := status(a.URL(p)); got != http.StatusNotFound {
			t.Errorf("public %s: %d, want 404", p, got)
		}
		if got := status(a.AdminURL(p)); got != http.StatusOK {
			t.Errorf("admin %s: %d, want 200", p, got)
		}
	}
	for _, u := range []string{a.URL("/healthz"), a.AdminURL("/healthz"), a.URL(httpapi.Prefix + "participants/room")} {
		if got := status(u); got != http.StatusOK {
			t.Errorf("%s: %d, want 200", u, got)
		}
	}
	if got := status(a.AdminURL("/callback")); got != http.StatusNotFound {
		t.Errorf("admin /callback: %d, want 404", got)
	}
}

// TestStartupWarnings: every risky setting is named in a warning at
// start-up, and a safe configuration gets none.
func TestStartupWarnings(t *testing.T) {
	var safe syncbuf.Buffer
	startAppLog(t, nil, map[string]string{"COUNTER_ADDR": "127.0.0.1:0"}, &safe)
	for _, risk := range []string{"secret", "public address", "maxmemory"} {
		if strings.Contains(safe.String(), risk) {
			t.Errorf("safe configuration warned about %q:\n%s", risk, safe.String())
		}
	}

	var risky syncbuf.Buffer
	startAppLog(t, nil, map[string]string{"VK_SECRET": "", "HTTP_ADDR": "0.0.0.0:0", "ADMIN_ADDR": "0.0.0.0:0",
		"COUNTER_ADDR": "0.0.0.0:0", "LOG_LEVEL": "info"}, &risky)
	for _, want := range []string{
		`{"level":"warn","group_id":` + strconv.Itoa(testGroup) + `,"message":"replies are sent but the community has no Callback API secret`,
		// Not a risk (/counters/ refuses remote clients without a token),
		// so said at info: why a remote client gets 401.
		`{"level":"info","http":`, "COUNTERS_HTTP_TOKEN is empty and HTTP_ADDR is not loopback",
	} {
		if !strings.Contains(risky.String(), want) {
			t.Errorf("no line %q in:\n%s", want, risky.String())
		}
	}
	// All addresses are exposed when this machine has a public one
	// (TestPublicAddr covers both cases).
	exposed := publicAddr(&net.TCPAddr{IP: net.IPv6unspecified}, net.InterfaceAddrs) != ""
	for _, want := range []string{"ADMIN_ADDR accepts connections on a public address", "COUNTER_ADDR accepts connections on a public address"} {
		if strings.Contains(risky.String(), want) != exposed {
			t.Errorf("this machine has a public address: %v, but %q said: %v\n%s", exposed, want, !exposed, risky.String())
		}
	}
}

// TestPublicAddr: a listener is exposed when it accepts connections on an
// address that is neither loopback nor private; on all addresses, when
// one of the machine's is public (a container or a Fly.io machine has
// private ones only).
func TestPublicAddr(t *testing.T) {
	ifaces := func(cidrs ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var out []net.Addr
			for _, c := range cidrs {
				ip, n, err := net.ParseCIDR(c)
				if err != nil {
					t.Fatal(err)
				}
				n.IP = ip
				out = append(out, n)
			}
			return out, nil
		}
	}
	private := ifaces("127.0.0.1/8", "::1/128", "172.19.2.10/24", "fdaa:0:1::2/64", "fe80::1/64")
	public := ifaces("127.0.0.1/8", "10.0.0.5/8", "2001:db8::5/64")
	broken := func() ([]net.Addr, error) { return nil, errors.New("no interfaces") }
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 9090} }
	for _, tc := range []struct {
		listen string
		ifaces func() ([]net.Addr, error)
		want   string
	}{
		{"127.0.0.1", public, ""},
		{"::1", public, ""},
		{"10.0.0.5", public, ""},
		{"fdaa:0:1::2", public, ""},
		{"203.0.113.7", private, "203.0.113.7"},
		{"::", private, ""},      // a Fly.io machine: [::]:9090 is private
		{"0.0.0.0", private, ""}, // a container
		{"::", public, "2001:db8::5"},
		{"0.0.0.0", broken, "0.0.0.0"},
	} {
		if got := publicAddr(tcp(tc.listen), tc.ifaces); got != tc.want {
			t.Errorf("listening on %s: public address %q, want %q", tc.listen, got, tc.want)
		}
	}
}

// TestEvictionWarning: a Redis whose maxmemory-policy evicts keys gets a
// warning saying what to set; the test servers (noeviction) get none. The
// evicting server is one of this test's own.
func TestEvictionWarning(t *testing.T) {
	tg := redistest.OwnServer(t) // a server of this test's own, so it may be reconfigured
	var clean syncbuf.Buffer
	startAppLog(t, tg, nil, &clean)
	if strings.Contains(clean.String(), "maxmemory") {
		t.Errorf("noeviction server warned:\n%s", clean.String())
	}
	if err := tg.Client.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	var evicting syncbuf.Buffer
	startAppLog(t, tg, nil, &evicting)
	if !strings.Contains(evicting.String(), `"maxmemory_policy":"volatile-lru"`) || !strings.Contains(evicting.String(), "set maxmemory-policy noeviction") {
		t.Errorf("no eviction warning in:\n%s", evicting.String())
	}
	// A user without CONFIG (a managed service's): the policy is read from
	// INFO memory, and the warning names it and what it costs.
	noConfig := *tg
	noConfig.URL = redistest.ACLUser(t, tg.Addr, "noconfig", "+@all", "-config")
	var managed syncbuf.Buffer
	startAppLog(t, &noConfig, nil, &managed)
	for _, want := range []string{`"level":"warn"`, "maxmemory-policy volatile-lru", "counts a retried message twice", "set maxmemory-policy noeviction"} {
		if !strings.Contains(managed.String(), want) {
			t.Errorf("a user without CONFIG: no %q in the log:\n%s", want, managed.String())
		}
	}
	// Without INFO either, the policy is unknown: a warning says so.
	noInfo := *tg
	noInfo.URL = redistest.ACLUser(t, tg.Addr, "noinfo", redistest.ManagedProfile...)
	var unknown syncbuf.Buffer
	startAppLog(t, &noInfo, nil, &unknown)
	if !strings.Contains(unknown.String(), "cannot read Redis's maxmemory-policy") || !strings.Contains(unknown.String(), `"level":"warn"`) {
		t.Errorf("a user without CONFIG and INFO: no warning in:\n%s", unknown.String())
	}
}

// TestReadyzFailsOnceRedisEvicted: under an evicting policy, /readyz stays
// 200 until Redis evicts a key, then answers 503 naming the evictions and
// the policy, and vkcounter_redis_evicted_keys counts them.
func TestReadyzFailsOnceRedisEvicted(t *testing.T) {
	tg := redistest.OwnServer(t, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "4mb")
	a := startApp(t, tg, nil)
	if code, body := get(t, a.AdminURL("/readyz")); code != 200 {
		t.Fatalf("/readyz before any eviction: %d %s", code, body)
	}
	big := strings.Repeat("x", 64<<10)
	for i := range 200 { // 12.8 MB into 4: evictions
		if err := tg.Client.Set(t.Context(), fmt.Sprintf("%sfill%d", a.Prefix, i), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, body := get(t, a.AdminURL("/readyz"))
	if code != 503 || !strings.Contains(body, "evicted") || !strings.Contains(body, "allkeys-lru") {
		t.Errorf("/readyz after evictions: %d %s, want 503 naming them and the policy", code, body)
	}
	metrics := a.ScrapeMetrics(t)
	for _, want := range []string{`vkcounter_redis_eviction_policy{policy="allkeys-lru"} 1`, "vkcounter_redis_evicted_keys "} {
		if !strings.Contains(metrics, "\n"+want) {
			t.Errorf("no %q in /metrics", want)
		}
	}
}
