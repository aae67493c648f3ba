package main

import (
	"context"
	"debug/elf"
	"fmt"
	goversion "go/version"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
	"github.com/vkcounter/vkcounter/internal/tcptest"
	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

// defaults returns each setting's default value by variable name.
func defaults() map[string]string {
	out := map[string]string{}
	for _, s := range config.Settings() {
		out[s.Env] = s.Default
	}
	return out
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// flyCheck is a check of fly.toml.
type flyCheck struct {
	Type   string `toml:"type"`
	Port   int    `toml:"port"`
	Path   string `toml:"path"`
	Method string `toml:"method"`
}

// flyToml is what TestFlyTomlMatchesProgram reads of fly.toml.
type flyToml struct {
	KillSignal  string            `toml:"kill_signal"`
	KillTimeout string            `toml:"kill_timeout"`
	Build       map[string]string `toml:"build"`
	Env         map[string]string `toml:"env"`
	HTTPService struct {
		InternalPort       int        `toml:"internal_port"`
		MinMachinesRunning *int       `toml:"min_machines_running"`
		AutoStopMachines   any        `toml:"auto_stop_machines"`
		ForceHTTPS         bool       `toml:"force_https"`
		Checks             []flyCheck `toml:"checks"`
	} `toml:"http_service"`
	Checks   map[string]flyCheck `toml:"checks"`
	Services []struct {
		InternalPort int `toml:"internal_port"`
	} `toml:"services"`
	Metrics struct {
		Port int    `toml:"port"`
		Path string `toml:"path"`
	} `toml:"metrics"`
}

// TestFlyTomlMatchesProgram checks that fly.toml parses and that its ports
// and paths are the ones the program serves by default.
func TestFlyTomlMatchesProgram(t *testing.T) {
	var fly flyToml
	md, err := toml.DecodeFile("../../fly.toml", &fly)
	if err != nil {
		t.Fatalf("fly.toml: %v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Logf("fly.toml keys not checked here: %v", und)
	}
	private := checkFlyPorts(t, &fly)
	ready := checkFlyMachine(t, &fly, private["ADMIN_ADDR"])
	raw, _ := os.ReadFile("../../fly.toml")
	for _, secret := range []string{"VK_TOKEN", "VK_SECRET", "VK_CONFIRMATION", "COUNTERS_HTTP_TOKEN", "REDIS_URL"} {
		if _, inEnv := fly.Env[secret]; inEnv || !strings.Contains(string(raw), secret) {
			t.Errorf("fly.toml must list %s among the secrets and not set it in [env]", secret)
		}
	}

	// The paths fly.toml names are served by the program, where it says.
	a := startApp(t, nil, nil)
	for _, u := range []string{a.URL(fly.HTTPService.Checks[0].Path), a.AdminURL(ready.Path), a.AdminURL(fly.Metrics.Path)} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
	}
}

// checkFlyPorts checks fly.toml's ports against the program's defaults
// and returns the private ones (COUNTER_ADDR, ADMIN_ADDR) by setting.
func checkFlyPorts(t *testing.T, fly *flyToml) map[string]int {
	t.Helper()
	def := defaults()
	httpPort := portOf(t, def["HTTP_ADDR"])
	if v := fly.Env["HTTP_ADDR"]; v != "" {
		httpPort = portOf(t, v)
	}
	// The private ports listen on every address (IPv6 too) for Fly's private
	// network and checks, and are never published as services.
	private := map[string]int{}
	for _, env := range []string{"COUNTER_ADDR", "ADMIN_ADDR"} {
		if got, want := portOf(t, fly.Env[env]), portOf(t, def[env]); got != want {
			t.Errorf("fly.toml %s port %d, program default %d", env, got, want)
		}
		if host, _, _ := net.SplitHostPort(fly.Env[env]); host != "::" {
			t.Errorf("%s %q must listen on [::] (IPv6 too) for Fly's private network", env, fly.Env[env])
		}
		private[env] = portOf(t, fly.Env[env])
		for _, s := range fly.Services {
			if s.InternalPort == private[env] {
				t.Errorf("%s's port %d is published as a service; it must stay private", env, private[env])
			}
		}
	}
	if fly.HTTPService.InternalPort != httpPort {
		t.Errorf("http_service.internal_port %d, program listens on %d", fly.HTTPService.InternalPort, httpPort)
	}
	return private
}

// checkFlyMachine checks how Fly runs the machine: never stopped, its
// checks and metrics on the admin port (adminPort), the image, the
// shutdown. It returns the readiness check.
func checkFlyMachine(t *testing.T, fly *flyToml, adminPort int) flyCheck {
	t.Helper()
	// VK expects an answer within seconds and replies are sent in the
	// background: machines are never stopped for idleness. Fly ignores
	// min_machines_running unless machines may be stopped, so it must not
	// be there to suggest otherwise.
	if stop := fmt.Sprint(fly.HTTPService.AutoStopMachines); stop != "off" && stop != "false" {
		t.Errorf("auto_stop_machines %q: a stopped machine answers no webhook and sends no reply; want off", stop)
	}
	if fly.HTTPService.MinMachinesRunning != nil {
		t.Errorf("min_machines_running = %d has no effect with auto_stop_machines off", *fly.HTTPService.MinMachinesRunning)
	}
	if len(fly.HTTPService.Checks) == 0 || fly.HTTPService.Checks[0].Path != "/healthz" {
		t.Errorf("http_service.checks %+v, want a check on /healthz", fly.HTTPService.Checks)
	}
	ready, ok := fly.Checks["ready"]
	if !ok || ready.Type != "http" || ready.Port != adminPort || ready.Path != "/readyz" {
		t.Errorf("[checks.ready] %+v, want an http check of /readyz on ADMIN_ADDR's port %d", ready, adminPort)
	}
	if fly.Metrics.Port != adminPort || fly.Metrics.Path != "/metrics" {
		t.Errorf("[metrics] %+v, want port %d (ADMIN_ADDR) path /metrics", fly.Metrics, adminPort)
	}
	if fly.Build["dockerfile"] != "Dockerfile" {
		t.Errorf("[build] %v, want dockerfile = Dockerfile", fly.Build)
	}
	kill, err1 := time.ParseDuration(fly.KillTimeout)
	shutdown, err2 := time.ParseDuration(fly.Env["SHUTDOWN_TIMEOUT"])
	if err1 != nil || err2 != nil || kill <= shutdown || fly.KillSignal != "SIGTERM" {
		t.Errorf("kill_signal %q kill_timeout %q SHUTDOWN_TIMEOUT %q: Fly must send SIGTERM and wait longer than the shutdown",
			fly.KillSignal, fly.KillTimeout, fly.Env["SHUTDOWN_TIMEOUT"])
	}
	return ready
}

// checkExposed checks that every port the Dockerfile (text) EXPOSEs is
// one the image (its ENV: image) listens on, on the container's addresses
// (a loopback one would be exposed in vain).
func checkExposed(t *testing.T, text string, image map[string]string) {
	t.Helper()
	def := defaults()
	for _, env := range []string{"HTTP_ADDR", "ADMIN_ADDR", "COUNTER_ADDR"} {
		addr := def[env]
		if v, ok := image[env]; ok {
			addr = v
		}
		if p := strconv.Itoa(portOf(t, addr)); !regexp.MustCompile(`(?m)^EXPOSE .*\b` + p + `\b`).MatchString(text) {
			t.Errorf("Dockerfile does not EXPOSE %s's port %s", env, p)
		}
		if host, _, _ := net.SplitHostPort(addr); host != "" && net.ParseIP(host).IsLoopback() || host == "localhost" {
			t.Errorf("the image's %s %q is loopback: its EXPOSE reaches nothing", env, addr)
		}
	}
}

// checkGoBuild checks the Dockerfile's (text) go build b: Go's caches
// survive between builds, and the builder's Go satisfies go.mod's go line.
func checkGoBuild(t *testing.T, b dockerBuild, text string) {
	t.Helper()
	// Go's caches survive between builds.
	for _, target := range []string{"/go/pkg/mod", "/root/.cache/go-build"} {
		if !slices.Contains(b.mounts, "--mount=type=cache,target="+target) {
			t.Errorf("go build has no cache mount of %s: %v", target, b.mounts)
		}
	}
	if !regexp.MustCompile(`(?m)^RUN --mount=type=cache,target=/go/pkg/mod go mod download$`).MatchString(text) ||
		!strings.HasPrefix(text, "# syntax=docker/dockerfile:1\n") {
		t.Error("go mod download needs the module cache mount, and the Dockerfile the syntax line that enables it")
	}
	// The builder's Go satisfies go.mod's go line: the golang images set
	// GOTOOLCHAIN=local and will not fetch a newer toolchain.
	m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(text)
	if m == nil || !strings.Contains(text, "FROM golang:${GO_VERSION} AS build") {
		t.Fatal("the build stage must be FROM golang:${GO_VERSION} with ARG GO_VERSION=<version>")
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goLine == nil || goversion.Compare("go"+m[1], "go"+string(goLine[1])) < 0 || !goversion.IsValid("go"+m[1]) {
		t.Errorf("builder golang:%s does not satisfy go.mod's go %s", m[1], goLine[1])
	}
}

// imageEnv returns the ENV of the Dockerfile's final stage.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	_, text := parseDockerfile(t)
	final := text[strings.LastIndex(text, "\nFROM "):]
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ENV (.+)$`).FindAllStringSubmatch(final, -1) {
		for _, kv := range strings.Fields(m[1]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("Dockerfile: ENV %q: want KEY=VALUE pairs", m[1])
			}
			env[k] = v
		}
	}
	return env
}

// deployEnv is what a machine deployed with the image and fly.toml gets
// before any secret is set: the image's ENV, then fly.toml's [env].
func deployEnv(t *testing.T) map[string]string {
	t.Helper()
	var fly struct {
		Env map[string]string `toml:"env"`
	}
	if _, err := toml.DecodeFile("../../fly.toml", &fly); err != nil {
		t.Fatal(err)
	}
	env := imageEnv(t)
	maps.Copy(env, fly.Env)
	return env
}

// TestDeployRefusesWhatWouldLookHealthy: the image with fly.toml's [env]
// and no secrets (a first `fly deploy` before `fly secrets set`), a
// misspelt REDIS_URL, no token, or a Redis that does not answer: the
// machine does not start, so the deploy stops there instead of running on
// an embedded Redis in dry-run.
func TestDeployRefusesWhatWouldLookHealthy(t *testing.T) {
	bin := program(t)
	closed := tcptest.FreeAddr(t) // nothing listens there once freePort returns
	for _, tc := range []struct {
		name  string
		extra map[string]string
		code  int
		want  []string
	}{
		{"no secrets", nil, exitUsage, []string{"REQUIRE_REDIS=true: REDIS_URL or REDIS_CLUSTER is required", "REQUIRE_VK_TOKEN=true: community 1 has no token"}},
		{"REDIS_URL without redis://", map[string]string{"REDIS_URL": "127.0.0.1:6390", "VK_GROUP_ID": "7", "VK_TOKEN": "t"}, exitUsage,
			[]string{`REDIS_URL: "127.0.0.1:6390" is an address, not a URL: write redis://127.0.0.1:6390/0`}},
		{"no token", map[string]string{"REDIS_URL": "redis://" + closed + "/0", "VK_GROUP_ID": "7"}, exitUsage, []string{"REQUIRE_VK_TOKEN=true: community 7 has no token"}},
		{"Redis does not answer", map[string]string{"REDIS_URL": "redis://" + closed + "/0", "VK_GROUP_ID": "7", "VK_TOKEN": "t"}, exitFailure, []string{`"cannot start"`, closed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := deployEnv(t)
			env["HTTP_ADDR"], env["ADMIN_ADDR"], env["COUNTER_ADDR"] = "127.0.0.1:0", "127.0.0.1:0", "off"
			maps.Copy(env, tc.extra)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			code := cmd.ProcessState.ExitCode()
			if err == nil || code != tc.code {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDeployNotReadyUntilVKAcceptsTheToken: deployed with a Redis and a
// token, the service starts, but /readyz fails with the reason while VK
// cannot be asked about the token or refuses it, and passes once VK
// accepts it (after a transient error too).
func TestDeployNotReadyUntilVKAcceptsTheToken(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	readyz := func(t *testing.T, vkURL string) func() (int, string) {
		env := deployEnv(t)
		env["ADMIN_ADDR"], env["COUNTER_ADDR"] = "127.0.0.1:0", "off"
		maps.Copy(env, map[string]string{"REDIS_URL": tg.URL, "KEY_PREFIX": redistest.Prefix(t),
			"VK_GROUP_ID": strconv.Itoa(servicetest.Group), "VK_TOKEN": "tok", "VK_SECRET": servicetest.Secret, "VK_CONFIRMATION": "c", "VK_API_URL": vkURL})
		delete(env, "HTTP_ADDR") // startBinary's
		p := startBinary(t, env)
		return func() (int, string) {
			resp, err := http.Get("http://" + p.Admin + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
	}
	waitReadyz := func(t *testing.T, get func() (int, string), code int, says string) {
		t.Helper()
		eventually.NoError(t, 10*time.Second, fmt.Sprintf("/readyz %d saying %q", code, says), func() error {
			if status, got := get(); status != code || !strings.Contains(got, says) {
				return fmt.Errorf("/readyz %d %q", status, got)
			}
			return nil
		})
	}

	t.Run("VK unreachable", func(t *testing.T) {
		get := readyz(t, "http://"+tcptest.FreeAddr(t)+"/method/")
		waitReadyz(t, get, 503, "not ready: vk: cannot check the token of community")
	})
	t.Run("token refused", func(t *testing.T) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.FailAlways(5)
		get := readyz(t, vk.MethodURL())
		waitReadyz(t, get, 503, "not ready: vk: community "+strconv.Itoa(servicetest.Group)+", token 1 of 1: VK refuses the token")
	})
	t.Run("one unknown error", func(t *testing.T) {
		// Error 1 says nothing of the token: it is asked again, with
		// backoff, and the service becomes ready.
		vk := vktest.NewServer()
		defer vk.Close()
		vk.FailAlways(1)
		get := readyz(t, vk.MethodURL())
		waitReadyz(t, get, 503, "not ready: vk: cannot check the token of community")
		vk.FailAlways(0)
		waitReadyz(t, get, 200, "ready")
	})
	t.Run("token accepted", func(t *testing.T) {
		vk := vktest.NewServer()
		defer vk.Close()
		get := readyz(t, vk.MethodURL())
		waitReadyz(t, get, 200, "ready")
		if n := vk.Calls("groups.getTokenPermissions"); n != 1 {
			t.Errorf("groups.getTokenPermissions called %d times, want 1", n)
		}
	})
}

// dockerBuild is the `go build` of the Dockerfile, parsed.
type dockerBuild struct {
	mounts []string // --mount=… of the RUN line
	env    []string // e.g. CGO_ENABLED=0
	args   []string // after "go build", without -o and its value; ${VERSION} is testVersion
	pkg    string
}

// testVersion is what staticBinary stamps for the Dockerfile's ${VERSION}.
const testVersion = "v0.0.0-dockerfile-test"

var (
	buildLine  = regexp.MustCompile(`(?m)^RUN ((?:--mount=\S+ )*)((?:[A-Z_]+=\S+ )*)go build (.*)$`)
	shellWords = regexp.MustCompile(`(?:[^\s"']+|"[^"]*"|'[^']*')+`) // words as sh splits them
)

func parseDockerfile(t *testing.T) (dockerBuild, string) {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, "") // continuation lines
	m := buildLine.FindStringSubmatch(joined)
	if m == nil {
		t.Fatal("Dockerfile has no RUN … go build line")
	}
	var b dockerBuild
	b.mounts = strings.Fields(m[1])
	b.env = strings.Fields(m[2])
	fields := shellWords.FindAllString(m[3], -1)
	for i := 0; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "-o":
			i++
		case strings.HasPrefix(f, "./"):
			b.pkg = f
		default:
			b.args = append(b.args, strings.NewReplacer(`"`, "", "'", "", "${VERSION}", testVersion).Replace(f))
		}
	}
	return b, text
}

func TestDockerfile(t *testing.T) {
	b, text := parseDockerfile(t)
	if b.pkg != "./cmd/vkcounter" {
		t.Errorf("Dockerfile builds %q, want ./cmd/vkcounter", b.pkg)
	}
	if !strings.Contains(strings.Join(b.env, " "), "CGO_ENABLED=0") {
		t.Errorf("Dockerfile builds with %v, want CGO_ENABLED=0", b.env)
	}
	if !regexp.MustCompile(`(?m)^FROM .* AS build$`).MatchString(text) || strings.Count(text, "FROM ") < 2 {
		t.Error("Dockerfile must be multi-stage (a build stage and a final stage)")
	}
	if m := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(text); m == nil || strings.HasPrefix(m[1], "root") || strings.HasPrefix(m[1], "0") {
		t.Errorf("the final image must run as a non-root user, got %v", m)
	}
	// The image is a deployment: no embedded Redis, no dry-run.
	image := imageEnv(t)
	for _, env := range []string{"REQUIRE_REDIS", "REQUIRE_VK_TOKEN"} {
		if image[env] != "true" {
			t.Errorf("the image sets %s=%q, want true", env, image[env])
		}
	}
	checkExposed(t, text, image)
	checkGoBuild(t, b, text)
	// The version is stamped in.
	if !slices.ContainsFunc(b.args, func(a string) bool {
		return strings.Contains(a, "-X github.com/vkcounter/vkcounter/internal/version.Stamp="+testVersion)
	}) || !regexp.MustCompile(`(?m)^ARG VERSION=`).MatchString(text) {
		t.Errorf("go build %v does not stamp ${VERSION} into internal/version.Stamp", b.args)
	}
}

// TestStaticBinaryVersion: the binary built as the Dockerfile builds it
// reports the stamped version, in `vkcounter version` and at start-up.
func TestStaticBinaryVersion(t *testing.T) {
	bin := staticBinary(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "vkcounter "+testVersion+" ") {
		t.Fatalf("vkcounter version: %v, %q; want it to start with vkcounter %s", err, out, testVersion)
	}
	p := startProgram(t, bin, nil)
	eventually.True(t, 5*time.Second, "the start-up line with the version", func() bool {
		return strings.Contains(p.log.String(), `"version":"`+testVersion+`"`)
	})
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// staticBinary builds the program exactly as the Dockerfile does, once. Only
// the tests of that build use it (it is static, it carries the version);
// under -short they are skipped, and with them the build.
func staticBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the image's static binary; run without -short")
	}
	b, _ := parseDockerfile(t)
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vkcounter-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "vkcounter")
		args := append([]string{"build"}, b.args...)
		args = append(args, "-o", binPath, b.pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go %v: %v\n%s", args, err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// programName is the name under which this test binary runs as vkcounter
// (see program).
const programName = "vkcounter"

// envProgram is set in the environment of a test binary running as
// vkcounter, so that what it starts of itself (loadtest -spawn without
// -bin) runs as vkcounter too.
const envProgram = "VKCOUNTER_TEST_AS_PROGRAM"

var (
	progOnce sync.Once
	progPath string
	progErr  error
)

// program returns the path of a vkcounter for the tests to run as a child
// process: a link named vkcounter to this test binary, which TestMain runs
// as the program when started under that name. The tests of a running
// program thus need no second build, and the program they run is the one
// the other tests run in process, built with the same flags (-race too).
func program(t *testing.T) string {
	t.Helper()
	progOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			progErr = err
			return
		}
		dir, err := os.MkdirTemp("", "vkcounter-prog")
		if err != nil {
			progErr = err
			return
		}
		progPath = filepath.Join(dir, programName)
		progErr = os.Symlink(exe, progPath)
	})
	if progErr != nil {
		t.Fatal(progErr)
	}
	return progPath
}

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == programName || os.Getenv(envProgram) == "1" {
		os.Setenv(envProgram, "1")
		main() // exits
	}
	code := redistest.Main(m)
	for _, p := range []string{binPath, progPath} {
		if p != "" {
			os.RemoveAll(filepath.Dir(p))
		}
	}
	os.Exit(code)
}

// process is the built binary running as a child.
type process struct {
	cmd                *exec.Cmd
	loadtest.Listening // from the start-up line
	done               chan error
	log                *syncbuf.Buffer
}

// startBinary runs the program with env and waits until it is fully up:
// /healthz answers and the start-up line is logged (the HTTP server listens
// before the counter port and the pollers start).
func startBinary(t *testing.T, env map[string]string) *process {
	t.Helper()
	return startProgram(t, program(t), env)
}

// startProgram is startBinary with the binary bin. Each port the program
// is not given in env is one it picks itself (":0"), read from its
// start-up line: a port picked free by the test and bound later could be
// taken in between, by this very program's other listener.
func startProgram(t *testing.T, bin string, env map[string]string) *process {
	t.Helper()
	p := &process{done: make(chan error, 1), log: &syncbuf.Buffer{}}
	p.cmd = exec.Command(bin)
	p.cmd.Env = []string{"HTTP_ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0", "COUNTER_ADDR=off", "LOG_LEVEL=info"}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("program output:\n%s", p.log.String())
		}
	})
	eventually.True(t, 10*time.Second, "the start-up line and /healthz", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("program exited before answering /healthz: %v\n%s", err, p.log.String())
		default:
		}
		if p.HTTP == "" && !p.readStartUpLine() {
			return false
		}
		resp, err := http.Get("http://" + p.HTTP + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// readStartUpLine sets the process's addresses from its start-up line and
// reports whether the line was logged.
func (p *process) readStartUpLine() bool {
	for line := range strings.Lines(p.log.String()) {
		if l, ok := loadtest.ReadStartUpLine([]byte(line)); ok {
			p.Listening = l
			return true
		}
	}
	return false
}

func TestStaticBinaryStartsAndAnswersHealthz(t *testing.T) {
	bin := staticBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v: not static", libs)
	}
	f.Close()
	p := startProgram(t, bin, nil) // no REDIS_URL: the embedded default
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15s of SIGTERM")
	}
}

// TestSIGTERMUnderLoad posts events while the program gets SIGTERM: every
// event answered "ok" must get its reply before the process exits 0.
func TestSIGTERMUnderLoad(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	vk.SetDelay(2 * time.Millisecond) // replies queue up behind a slowish VK
	p := startBinary(t, map[string]string{
		"VK_API_URL": vk.MethodURL(), "VK_TOKEN": "tok", "VK_GROUP_ID": strconv.Itoa(servicetest.Group),
		"VK_SECRET": servicetest.Secret, "VK_RATE": "400", "SHUTDOWN_TIMEOUT": "20s"})
	url := "http://" + p.HTTP + "/callback"

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	okPeers := map[int]bool{}
	var wg sync.WaitGroup
	var sent sync.WaitGroup
	sent.Add(1)
	var once sync.Once
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 2000; i++ {
				peer := 1 + w*100000 + i
				resp, err := http.Post(url, "application/json", strings.NewReader(string(servicetest.Event(fmt.Sprintf("t%d", peer), peer, 1, "term"))))
				if err != nil {
					return // the listener is closed: shutdown began
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && string(b) == "ok" {
					mu.Lock()
					okPeers[peer] = true
					if len(okPeers) == 300 {
						once.Do(sent.Done)
					}
					mu.Unlock()
				}
			}
		}()
	}
	sent.Wait()
	p.cmd.Process.Signal(syscall.SIGTERM)
	var exitErr error
	select {
	case exitErr = <-p.done:
	case <-ctx.Done():
		t.Fatal("no exit after SIGTERM")
	}
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("exit status after SIGTERM: %v", exitErr)
	}
	got := map[int]int{}
	for _, s := range vk.Sends() {
		got[s.PeerID]++
	}
	missing := 0
	for peer := range okPeers {
		if got[peer] != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d events answered ok got no reply (or several) before exit", missing, len(okPeers))
	}
	t.Logf("%d events answered ok before SIGTERM closed the listener; all replied", len(okPeers))
	if !strings.Contains(p.log.String(), `"stopped"`) {
		t.Error("no 'stopped' log line")
	}
}

// loopbackPorts is how compose publishes the image's listeners (its ENV,
// else the defaults) on the host's loopback only: 127.0.0.1:P:P each.
func loopbackPorts(t *testing.T) []string {
	t.Helper()
	env, def := imageEnv(t), defaults()
	var ports []string
	for _, name := range []string{"HTTP_ADDR", "ADMIN_ADDR", "COUNTER_ADDR"} {
		addr := def[name]
		if v, ok := env[name]; ok {
			addr = v
		}
		p := strconv.Itoa(portOf(t, addr))
		ports = append(ports, "127.0.0.1:"+p+":"+p)
	}
	return ports
}

// isHealthcheckCommand reports whether a container's health check test is
// the binary's own healthcheck command, run without a shell.
func isHealthcheckCommand(hc []string) bool {
	return len(hc) == 3 && hc[0] == "CMD" && hc[1] == "/usr/local/bin/vkcounter" && hc[2] == "healthcheck" &&
		slices.ContainsFunc(commands(), func(c command) bool { return c.name == hc[2] })
}

// TestComposeFile: compose.yaml runs the image next to a Redis that keeps
// its data (AOF) and never evicts, reaches it by its service name, and
// publishes every port the image listens on, on loopback only.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image string `yaml:"image"`
			Build struct {
				Context string            `yaml:"context"`
				Args    map[string]string `yaml:"args"`
			} `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	r, svc := compose.Services["redis"], compose.Services["vkcounter"]
	cmd := strings.Join(r.Command, " ")
	if !strings.HasPrefix(r.Image, "redis:") || !strings.Contains(cmd, "--maxmemory-policy noeviction") || !strings.Contains(cmd, "--appendonly yes") {
		t.Errorf("redis: image %q, command %q: want Redis with noeviction and AOF", r.Image, cmd)
	}
	if svc.Build.Context != "." || svc.Environment["REDIS_URL"] != "redis://redis:6379/0" {
		t.Errorf("vkcounter: build %q, REDIS_URL %q: want the Dockerfile's image on the redis service", svc.Build.Context, svc.Environment["REDIS_URL"])
	}
	// The image's version stamp, passed through.
	if _, dockerfile := parseDockerfile(t); !strings.HasPrefix(svc.Build.Args["VERSION"], "${VERSION") || !strings.Contains(dockerfile, "ARG VERSION") {
		t.Errorf("vkcounter: build args %v: want VERSION passed through to the Dockerfile's ARG VERSION", svc.Build.Args)
	}
	// The health check: the image has no shell and no HTTP client, so
	// the binary itself asks /readyz (a command it has).
	if hc := svc.Healthcheck.Test; !isHealthcheckCommand(hc) {
		t.Errorf("vkcounter: healthcheck %q, want [CMD /usr/local/bin/vkcounter healthcheck]", hc)
	}
	// The README's laptop path (Bots Long Poll) sets these and nothing
	// else: each must reach the service.
	for _, name := range []string{"VK_MODE", "VK_GROUP_ID", "VK_TOKEN"} {
		if !strings.HasPrefix(svc.Environment[name], "${"+name) {
			t.Errorf("vkcounter: %s=%q, want it passed through from the environment (${%s:-…})", name, svc.Environment[name], name)
		}
	}
	def := defaults()
	want := loopbackPorts(t)
	if len(r.Ports) != 0 || !slices.Equal(svc.Ports, want) {
		t.Errorf("ports: redis %v, vkcounter %v; want Redis unpublished and %v", r.Ports, svc.Ports, want)
	}
	for k, v := range svc.Environment {
		if _, known := def[k]; !known {
			t.Errorf("compose.yaml sets %s=%q, which is no setting", k, v)
		}
	}
}

// TestDefaultAddressesAreLoopback: the counter port and the admin server
// listen on loopback unless told otherwise, so another host cannot reach
// them; the public HTTP server listens on every address.
func TestDefaultAddressesAreLoopback(t *testing.T) {
	def := defaults()
	for _, env := range []string{"COUNTER_ADDR", "ADMIN_ADDR"} {
		host, _, err := net.SplitHostPort(def[env])
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("%s default %q: want a loopback IP address", env, def[env])
		}
	}
	if host, _, _ := net.SplitHostPort(def["HTTP_ADDR"]); host != "" {
		t.Errorf("HTTP_ADDR default %q: VK must reach the webhook", def["HTTP_ADDR"])
	}

	// The defaults' hosts, on ports of their own so that tests running at
	// once do not collide: nothing answers on this machine's other address.
	ip := tcptest.HostIP(t)
	counterHost, _, _ := net.SplitHostPort(def["COUNTER_ADDR"])
	adminHost, _, _ := net.SplitHostPort(def["ADMIN_ADDR"])
	a := startApp(t, nil, map[string]string{"COUNTER_ADDR": net.JoinHostPort(counterHost, "0"), "ADMIN_ADDR": net.JoinHostPort(adminHost, "0")})
	for name, addr := range map[string]string{"counter port": a.CounterAddr(), "admin server": a.AdminAddr()} {
		_, port, _ := net.SplitHostPort(addr)
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port), time.Second); err == nil {
			c.Close()
			t.Errorf("%s (%s) answers on %s", name, addr, ip)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
			t.Errorf("%s (%s) does not answer on loopback: %v", name, addr, err)
		} else {
			c.Close()
		}
	}
}
