package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/loadtest"
	"github.com/vkcounter/vkcounter/vktest"
)

const loadtestHelp = `Usage:
  vkcounter loadtest callback [flags]   post VK Callback API events to a bot and check every reply
  vkcounter loadtest counters [flags]   drive a counter port and check every response

Both report progress on stderr (a live line on a terminal, a plain line
every 10 seconds otherwise), then print a summary (or -json) on stdout.
They exit 0 when every answer was right, 1 if any was wrong or the run
could not be made, 2 on a usage error (nothing is sent). Targets must be on
the loopback unless -allow-remote is given. "vkcounter loadtest TOOL -h"
lists a tool's flags.
`

var callbackHelp = `Usage: vkcounter loadtest callback (-url URL | -spawn) [-longpoll] [flags]

Posts message_new events to a bot's webhook and checks the replies the bot
sends to a fake VK API run by this command: one per event, to the right
peer, with the random_id derived from the message, and for each text the
numbers 0 … M-1 (in order when the text's events were not in flight
together).

With -longpoll, the events are queued instead in the Bots Long Poll server
of the fake VK API, which the bot (VK_MODE=longpoll) polls; an event counts
as answered "ok" once the bot asks for the events after it, and each
text's numbers must follow the order of the events.

With -url, start the bot with the VK_API_URL and community this command
prints (it waits -wait for the bot to answer); fix the fake API's address
with -vk-addr to start the bot first. With -spawn, this command starts the
bot itself (vkcounter serve) wired to its fake VK API and to -redis (or
-redis-cluster), or to the bot's embedded Redis when neither is given.

The seed's scenarios: -texts 300 -per-text 10 and -texts 3000 -per-text 1;
expired: -texts 3000 -per-text 1 -expired 1, which needs the bot's Redis
(-redis or -redis-cluster, and -key-prefix).

Faults (-faults): a comma-separated schedule, each fault
KIND@START+DURATION[=VALUE], times as Go durations from the first event
posted, e.g.
  -faults 'redis-stall@2s+10s,vk-down@5s+12s,redis-latency@1s+5s=50ms,vk-flood@3s+5s=2'
Redis faults act on a proxy this command runs in front of -redis (not a
cluster, nor the embedded Redis): with -spawn the bot is given the proxy,
with -url start it with the REDIS_URL printed. VK faults act on the fake VK
API. The run lasts until every event is posted and every fault has ended,
then waits -reply-timeout for the replies. Under faults a reply sent twice
with one random_id is a problem too (as with -strict-sends); a refused
event is posted again after its Retry-After, as VK does. Kinds:
` + loadtest.FaultHelp() + `
Flags:
`

const countersHelp = `Usage: vkcounter loadtest counters (-addr HOST:PORT | -spawn) [flags]

Sends counter protocol requests over -conns connections, each with up to
-depth requests in flight, and checks every response: magic, opcode,
opaque, status and body. It runs only against the server named by -addr,
or one it starts itself with -spawn. It stops after -requests requests or
after -duration, whichever comes first; -requests 0 with -duration runs
for the whole duration. Workloads (-op, comma-separated, cycled):
  acquire   acquire 1 of one of -names shared counters, then release it
  get       get a counter this connection holds (the value is known)
  noop      noop
  hit       hit this connection's own access counter (totals 1, 2, 3, …)
  visit     visit this connection's own participant counter with 100 keys in turn
  whit      hit this connection's own window counter, a day's window (answers 0, 1, 2, …)
  uadd      add keys to this connection's own unique counter: a new key, then
            the same again (which must change nothing)

-addr takes several servers, comma-separated: connection i talks to server
i mod n. With -max N (and -op acquire alone) the run checks a shared
maximum across them: each connection acquires 1 of a shared name with
maximum N, one request at a time, holds it for a while and releases it; a
grant that takes what the run's connections hold past N is a violation
(over_maximum), and at the end every server must report as consumption what
the connections hold (wrong_consumption). Run it against instances sharing
RESOURCE_STORE=redis; instances with their own memory counters fail it.

Flags:
`

// outputFlags are the flags both tools share.
type outputFlags struct {
	json        bool
	report      string
	allowRemote bool
	spawn       bool
	bin         string
}

func (f *outputFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fs.StringVar(&f.report, "report", "", "also write a self-contained HTML report (latency over time, histogram) to `FILE`")
	fs.BoolVar(&f.allowRemote, "allow-remote", false, "allow targets outside the loopback range")
	fs.BoolVar(&f.spawn, "spawn", false, "start the service (vkcounter serve) for the run and stop it after")
	fs.StringVar(&f.bin, "bin", "", "the vkcounter binary -spawn starts (default: this program)")
}

// runLoadtest is `vkcounter loadtest`: it runs one load tool and returns
// the exit code.
func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, loadtestHelp)
		return exitUsage
	}
	switch args[0] {
	case "callback":
		return loadtestCallback(ctx, args[1:], stdout, stderr)
	case "counters":
		return loadtestCounters(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, loadtestHelp)
		return exitOK
	}
	return usageError(stderr, "loadtest", fmt.Errorf("unknown tool %q (callback, counters)", args[0]))
}

// parseLoadtestFlags is parseFlags for a load tool, which takes no
// arguments besides its flags.
func parseLoadtestFlags(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok := parseFlags(fs, args, help, stdout, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), fmt.Errorf("unexpected argument %q", fs.Arg(0))), false
	}
	return exitOK, true
}

func loadtestCallback(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest callback", flag.ContinueOnError)
	var out outputFlags
	out.bind(fs)
	var o loadtest.CallbackOptions
	webhook := fs.String("url", "", "the bot's webhook `URL`, e.g. http://127.0.0.1:8080/callback")
	fs.BoolVar(&o.LongPoll, "longpoll", false, "deliver the events through the fake API's Bots Long Poll server (the bot runs with VK_MODE=longpoll) instead of the webhook")
	vkAddr := fs.String("vk-addr", "127.0.0.1:0", "listen address of the fake VK API")
	fs.IntVar(&o.GroupID, "group", loadtest.DefaultGroupID, "community id the bot serves")
	fs.StringVar(&o.Secret, "secret", "loadtest", "the community's Callback API secret")
	fs.IntVar(&o.Texts, "texts", loadtest.DefaultTexts, "distinct texts")
	fs.IntVar(&o.PerText, "per-text", loadtest.DefaultPerText, "events per text")
	fs.IntVar(&o.Peers, "peers", 0, "conversations sending the events (0 = one per event, every reply attributed beyond doubt)")
	fs.IntVar(&o.Concurrency, "concurrency", loadtest.DefaultConcurrency, "requests in flight")
	fs.Float64Var(&o.Rate, "rate", 0, "events per second (0 = as fast as possible)")
	fs.DurationVar(&o.Duration, "duration", 0, "stop posting after this long (0 = when every event is posted)")
	fs.Float64Var(&o.RetryFraction, "retry-fraction", 0, "share of events posted again with the same event_id and X-Retry-Counter")
	fs.Float64Var(&o.NoEventID, "no-event-id", 0, "share of events posted without event_id, to be recognised by the message's identity")
	fs.IntVar(&o.Expired, "expired", 0, "store this many occurrences of every text, older than the window, before the run (as vkcounter prefill, with the bot's settings; 0 = none)")
	redisURL := fs.String("redis", "", "the bot's Redis `URL`, for -expired; with -spawn, the bot is given it")
	redisCluster := fs.String("redis-cluster", "", "the bot's Redis Cluster, comma-separated host:port, instead of -redis")
	keyPrefix := fs.String("key-prefix", "vkc:", "the bot's KEY_PREFIX (with -spawn the default is "+spawnKeyPrefix+", so a run never writes into a service's own keys)")
	fs.DurationVar(&o.Window, "window", 0, "the bot's WINDOW (0 = ask the bot's /stats at -stats-url; with -spawn, 24h)")
	fs.StringVar(&o.StatsURL, "stats-url", "http://127.0.0.1:9090/stats", "the bot's /stats `URL` (on its ADMIN_ADDR), read for its WINDOW")
	normalize := fs.Bool("normalize", false, "the bot's NORMALIZE")
	fs.DurationVar(&o.Wait, "wait", 30*time.Second, "how long to wait for the bot to answer before the run (0 = it must answer at once)")
	fs.DurationVar(&o.Timeout, "timeout", loadtest.DefaultTimeout, "time limit of one webhook request")
	fs.DurationVar(&o.ReplyTimeout, "reply-timeout", loadtest.DefaultReplyTimeout, "how long to wait for the replies after the last event")
	fs.IntVar(&o.MaxAttempts, "attempts", loadtest.DefaultMaxAttempts, "times an event is posted before it counts as not counted")
	faultSpec := fs.String("faults", "", "fault `SCHEDULE`, e.g. redis-stall@2s+10s,vk-down@5s+12s (see above)")
	proxyAddr := fs.String("redis-proxy-addr", "127.0.0.1:0", "listen address of the proxy in front of -redis, for Redis faults")
	fs.BoolVar(&o.StrictSends, "strict-sends", false, "a reply sent twice with one random_id is a problem (always, under -faults)")
	if code, ok := parseLoadtestFlags(fs, args, callbackHelp, stdout, stderr); !ok {
		return code
	}
	if out.spawn && !givenFlags(fs)["key-prefix"] {
		*keyPrefix = spawnKeyPrefix
	}
	if err := checkCallbackFlags(&o); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	var err error
	if o.Faults, err = loadtest.ParseFaults(*faultSpec); err != nil {
		return usageError(stderr, fs.Name(), fmt.Errorf("-faults: %v", err))
	}
	redisFaults := slices.ContainsFunc(o.Faults, loadtest.Fault.Redis)
	fail := func(err error) int { return failure(stderr, fs.Name(), err) }
	o.AllowRemote, o.Progress = out.allowRemote, stderr
	switch {
	case o.LongPoll && *webhook != "":
		return usageError(stderr, fs.Name(), errors.New("-longpoll takes no -url: the bot asks the fake VK API for the events"))
	case !o.LongPoll && (*webhook == "") == !out.spawn:
		return usageError(stderr, fs.Name(), errors.New("give -url or -spawn (one of them)"))
	case *redisURL != "" && *redisCluster != "":
		return usageError(stderr, fs.Name(), errors.New("give -redis or -redis-cluster, not both"))
	case redisFaults && *redisURL == "":
		return usageError(stderr, fs.Name(), errors.New("-faults: Redis faults need the bot's Redis as -redis (a single server: the proxy can stand neither in front of a cluster nor of the embedded Redis)"))
	case o.Expired > 0 && *redisURL == "" && *redisCluster == "":
		return usageError(stderr, fs.Name(), errors.New("-expired writes into the bot's Redis: give -redis or -redis-cluster"))
	}
	if err := checkRedisTargets(*redisURL, *redisCluster, out.allowRemote); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if err := checkURLTarget("url", *webhook, out.allowRemote); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if !out.spawn && o.Window == 0 { // the window is asked at -stats-url
		if err := checkURLTarget("stats-url", o.StatsURL, out.allowRemote); err != nil {
			return usageError(stderr, fs.Name(), err)
		}
	}
	if err := checkListenAddr("vk-addr", *vkAddr); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if redisFaults {
		if u, err := url.Parse(*redisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return usageError(stderr, fs.Name(), errors.New("-faults: Redis faults need -redis as a redis:// or rediss:// URL with a host"))
		}
		if err := checkListenAddr("redis-proxy-addr", *proxyAddr); err != nil {
			return usageError(stderr, fs.Name(), err)
		}
	}
	botRedis := *redisURL // what the bot is told
	if redisFaults {
		proxy, proxied, err := loadtest.ProxyRedis(*redisURL, *proxyAddr)
		if err != nil {
			return fail(err)
		}
		defer proxy.Close()
		o.RedisProxy, botRedis = proxy, proxied
	}

	vk, err := vktest.Start(vktest.Options{Addr: *vkAddr})
	if err != nil {
		return fail(err)
	}
	defer vk.Close()

	env := map[string]string{
		"VK_API_URL": vk.MethodURL(), "VK_TOKEN": "loadtest", "VK_GROUP_ID": strconv.Itoa(o.GroupID),
		"VK_SECRET": o.Secret, "VK_RATE": "1000000", "KEY_PREFIX": *keyPrefix, "NORMALIZE": strconv.FormatBool(*normalize),
	}
	if o.LongPoll {
		env["VK_MODE"] = ModeLongPoll
	}
	if botRedis != "" || out.spawn { // empty: the spawned bot's embedded Redis
		env["REDIS_URL"] = botRedis
	}
	if *redisCluster != "" || out.spawn {
		env["REDIS_CLUSTER"] = *redisCluster
	}
	if out.spawn {
		if o.Window == 0 {
			o.Window = 24 * time.Hour
		}
		env["WINDOW"] = o.Window.String()
		env["VK_GROUPS"], env["HTTP_ADDR"], env["COUNTER_ADDR"] = "", "127.0.0.1:0", "off"
		svc, err := loadtest.Spawn(ctx, out.bin, env)
		if err != nil {
			return fail(err)
		}
		defer stopService(svc, fs.Name(), stderr)
		if !o.LongPoll {
			*webhook = "http://" + svc.HTTPAddr() + "/callback"
		}
	} else {
		fmt.Fprintf(stderr, "fake VK API at %s; start the bot with:\n  %s vkcounter serve\n", vk.MethodURL(), envLine(env))
	}
	o.URL, o.VK = *webhook, vk

	if o.Expired > 0 {
		o.Prefill = prefillAs(env, botRedis, *redisCluster)
	}
	rep, err := loadtest.RunCallback(ctx, o)
	if err != nil {
		return fail(err)
	}
	return finish(rep, out, stdout, stderr)
}

func loadtestCounters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest counters", flag.ContinueOnError)
	var out outputFlags
	out.bind(fs)
	var o loadtest.CountersOptions
	fs.StringVar(&o.Addr, "addr", "", "the counter server(s), comma-separated `HOST:PORT,...`, e.g. 127.0.0.1:11215 (or -spawn)")
	ops := fs.String("op", string(loadtest.OpAcquire), "workloads, comma-separated: acquire, get, noop, hit, visit, whit, uadd")
	fs.IntVar(&o.Conns, "conns", loadtest.DefaultConns, fmt.Sprintf("connections (at most %d)", loadtest.MaxConns))
	fs.IntVar(&o.Depth, "depth", loadtest.DefaultDepth, fmt.Sprintf("requests in flight per connection (pipelining; at most %d)", loadtest.MaxDepth))
	fs.IntVar(&o.Names, "names", loadtest.DefaultNames, "shared counter names of the acquire workload")
	maxFlag := fs.Uint("max", 0, "check a shared maximum of `N` across the servers (with -op acquire alone; 0 = off)")
	fs.Int64Var(&o.Requests, "requests", loadtest.DefaultRequests, "requests to send in all; 0 = no limit, run for -duration")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (0 = no limit, stop after -requests)")
	fs.DurationVar(&o.Timeout, "timeout", loadtest.DefaultCounterTimeout, "time limit for connecting and for each response")
	if code, ok := parseLoadtestFlags(fs, args, countersHelp, stdout, stderr); !ok {
		return code
	}
	var err error
	if o.Ops, err = loadtest.ParseOps(*ops); err != nil {
		return usageError(stderr, fs.Name(), fmt.Errorf("-op: %v", err))
	}
	if err := checkCountersFlags(&o); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	switch {
	case (o.Addr == "") == !out.spawn:
		return usageError(stderr, fs.Name(), errors.New("give -addr HOST:PORT or -spawn (one of them)"))
	case o.Requests == 0 && o.Duration == 0:
		return usageError(stderr, fs.Name(), errors.New("-requests 0 runs until -duration: give -duration too"))
	}
	if o.Addr != "" {
		for _, a := range strings.Split(o.Addr, ",") {
			host, _, err := net.SplitHostPort(a)
			if err != nil {
				return usageError(stderr, fs.Name(), fmt.Errorf("-addr %q: want HOST:PORT such as 127.0.0.1:11215", a))
			}
			if err := checkHost("addr", host, out.allowRemote); err != nil {
				return usageError(stderr, fs.Name(), err)
			}
		}
	}
	if *maxFlag > math.MaxUint32 {
		return usageError(stderr, fs.Name(), errors.New("-max must fit in 4 bytes"))
	}
	if *maxFlag > 0 && (len(o.Ops) != 1 || o.Ops[0] != loadtest.OpAcquire) {
		return usageError(stderr, fs.Name(), errors.New("-max checks the acquire workload: give -op acquire alone"))
	}
	o.AllowRemote, o.Progress, o.Maximum = out.allowRemote, stderr, uint32(*maxFlag)
	if out.spawn {
		svc, err := loadtest.Spawn(ctx, out.bin, map[string]string{
			"HTTP_ADDR": "127.0.0.1:0", "COUNTER_ADDR": "127.0.0.1:0", "REDIS_URL": "", "REDIS_CLUSTER": "",
			"VK_TOKEN": "", "VK_GROUP_ID": "", "VK_GROUPS": "", "VK_SECRET": "",
		})
		if err != nil {
			return failure(stderr, fs.Name(), err)
		}
		defer stopService(svc, fs.Name(), stderr)
		if a := svc.CounterAddr(); a == "" || a == CounterOff {
			return failure(stderr, fs.Name(), errors.New("the spawned service does not say where its counter port is"))
		}
		o.Addr = svc.CounterAddr()
	}
	rep, err := loadtest.RunCounters(ctx, o)
	if err != nil {
		return failure(stderr, fs.Name(), err)
	}
	return finish(rep, out, stdout, stderr)
}

// prefillAs returns the load tool's prefill: `vkcounter prefill` with the
// settings the bot is given (env, with its Redis), so it writes the keys
// the bot reads, and with the run's window.
func prefillAs(env map[string]string, redisURL, redisCluster string) func(context.Context, []string, int, time.Duration) error {
	return func(ctx context.Context, texts []string, n int, window time.Duration) error {
		own := maps.Clone(env)
		own["REDIS_URL"], own["REDIS_CLUSTER"], own["VK_GROUPS"], own["WINDOW"] = redisURL, redisCluster, "", window.String()
		cfg, err := parseConfig(nil, func(k string) string {
			if v, ok := own[k]; ok {
				return v
			}
			return os.Getenv(k)
		}, io.Discard)
		if err != nil {
			return fmt.Errorf("the bot's settings: %w", err)
		}
		return prefill(ctx, cfg, texts, n)
	}
}

// finish prints the report and writes the HTML page, and returns the exit
// code: 1 if any answer was wrong.
func finish(rep *loadtest.Report, out outputFlags, stdout, stderr io.Writer) int {
	var err error
	if out.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err == nil && out.report != "" {
		err = writeHTMLReport(rep, out.report)
	}
	if err != nil {
		return failure(stderr, "loadtest "+rep.Tool, err)
	}
	if !rep.OK() {
		return exitFailure
	}
	return exitOK
}

func writeHTMLReport(rep *loadtest.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// envLine prints env as shell assignments, sorted.
func envLine(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + shellQuote(env[k]))
	}
	return b.String()
}

// shellQuote quotes s for sh when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/,@%+=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkRedisTargets refuses Redis servers outside the loopback.
func checkRedisTargets(redisURL, cluster string, allowRemote bool) error {
	if redisURL != "" {
		u, err := url.Parse(redisURL)
		if err != nil {
			return fmt.Errorf("-redis %q: %w", redisURL, err)
		}
		if err := checkHost("redis", u.Hostname(), allowRemote); err != nil {
			return err
		}
	}
	for _, addr := range strings.Split(cluster, ",") {
		if addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(strings.TrimSpace(addr))
		if err != nil {
			return fmt.Errorf("-redis-cluster %q: %w", addr, err)
		}
		if err := checkHost("redis-cluster", host, allowRemote); err != nil {
			return err
		}
	}
	return nil
}

// stopService stops a spawned service, reporting a failed exit on stderr.
func stopService(svc *loadtest.Service, cmd string, stderr io.Writer) {
	if err := svc.Stop(); err != nil {
		fmt.Fprintf(stderr, "vkcounter %s: %s\n", cmd, strings.TrimRight(err.Error(), "\n"))
	}
}

// checkHost refuses host, given in the flag name, unless it is on the
// loopback or -allow-remote is given.
func checkHost(name, host string, allowRemote bool) error {
	if err := loadtest.CheckHost(host, allowRemote); err != nil {
		return fmt.Errorf("-%s: %s is not on this machine's loopback; give -allow-remote to load another machine", name, host)
	}
	return nil
}

// checkURLTarget checks the http(s) URL of the flag name, if given, and
// refuses its host unless it is on the loopback or -allow-remote is given.
func checkURLTarget(name, raw string, allowRemote bool) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-%s %q: want an http:// or https:// URL", name, raw)
	}
	return checkHost(name, u.Hostname(), allowRemote)
}

// checkListenAddr checks the listen address of the flag name.
func checkListenAddr(name, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("-%s %q: want HOST:PORT such as 127.0.0.1:0", name, addr)
	}
	return nil
}

// checkCallbackFlags checks the values of the callback tool's flags before
// anything starts. 0 is refused where it means nothing: the loadtest
// package would quietly take its default instead.
func checkCallbackFlags(o *loadtest.CallbackOptions) error {
	if err := firstError(
		atLeast("group", o.GroupID, 1),
		atLeast("texts", o.Texts, 1),
		atLeast("per-text", o.PerText, 1),
		atLeast("peers", o.Peers, 0), // 0: one per event
		atLeast("concurrency", o.Concurrency, 1),
		finite("rate", o.Rate),
		atLeast("rate", o.Rate, 0),         // 0: as fast as possible
		atLeast("duration", o.Duration, 0), // 0: until every event is posted
		fraction("retry-fraction", o.RetryFraction),
		fraction("no-event-id", o.NoEventID),
		atLeast("expired", o.Expired, 0), // 0: none
		atLeast("window", o.Window, 0),   // 0: ask the bot
		atLeast("wait", o.Wait, 0),       // 0: the bot must answer at once
		positive("timeout", o.Timeout),
		positive("reply-timeout", o.ReplyTimeout),
		atLeast("attempts", o.MaxAttempts, 1),
	); err != nil {
		return err
	}
	if o.Window%time.Second != 0 {
		return fmt.Errorf("-window %v: must be whole seconds", o.Window)
	}
	if n := int64(o.Texts) * int64(o.PerText); n > loadtest.MaxEvents {
		return fmt.Errorf("-texts %d × -per-text %d = %d events: at most %d in a run", o.Texts, o.PerText, n, loadtest.MaxEvents)
	}
	return nil
}

// checkCountersFlags checks the values of the counters tool's flags before
// anything starts, as checkCallbackFlags.
func checkCountersFlags(o *loadtest.CountersOptions) error {
	return firstError(
		atLeast("conns", o.Conns, 1),
		atMost("conns", o.Conns, loadtest.MaxConns),
		atLeast("depth", o.Depth, 1),
		atMost("depth", o.Depth, loadtest.MaxDepth),
		atLeast("names", o.Names, 1),
		atLeast("requests", o.Requests, 0), // 0: until -duration ends
		atLeast("duration", o.Duration, 0), // 0: until -requests are sent
		positive("timeout", o.Timeout),
	)
}

// atLeast refuses a value of the flag name below least.
func atLeast[T int | int64 | float64 | time.Duration](name string, v, least T) error {
	switch {
	case v >= least:
		return nil
	case least == 0:
		return fmt.Errorf("-%s %v: must not be negative", name, v)
	}
	return fmt.Errorf("-%s %v: must be at least %v", name, v, least)
}

// atMost refuses a value of the flag name above most.
func atMost(name string, v, most int) error {
	if v > most {
		return fmt.Errorf("-%s %d: must be at most %d", name, v, most)
	}
	return nil
}

// positive refuses a time limit of the flag name that is not above 0.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("-%s %v: must be more than 0", name, d)
	}
	return nil
}

// finite refuses NaN and infinities.
func finite(name string, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("-%s %v: want a number such as 20 or 2.5", name, f)
	}
	return nil
}

// fraction refuses a share of the flag name outside 0 … 1 (or NaN).
func fraction(name string, f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("-%s %v: must be between 0 and 1", name, f)
	}
	return nil
}

// firstError returns the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// spawnKeyPrefix is the KEY_PREFIX of a service the load tool starts, unless
// -key-prefix says otherwise: a run against a shared Redis leaves the keys of
// the service that uses it alone.
const spawnKeyPrefix = "vkc-loadtest:"
