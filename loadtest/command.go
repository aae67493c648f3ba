package loadtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/vktest"
)

// This file is the two tools as `vkcounter loadtest` runs them: their
// flags, the one check of their values (Validate), and the run, which
// starts what the options need (the fake VK API, the Redis fault proxy,
// the service itself with -spawn) and stops it after. The program only
// parses the flags and prints the report.

// CallbackUsage is the help of `vkcounter loadtest callback`, before its
// flags.
var CallbackUsage = `Usage: vkcounter loadtest callback (-url URL | -spawn) [-longpoll] [flags]

Posts message_new events to a bot's webhook and checks the replies the bot
sends to a fake VK API run by this command: one per event, to the right
peer, with a random_id the community has not used before (a repeat is
reported as swallowed, as VK would swallow it), and for each text the
numbers 0 … M-1 (in order when the text's events were not in flight
together).

With -longpoll, the events are queued instead in the Bots Long Poll server
of the fake VK API, which the bot (VK_MODE=longpoll) polls; an event counts
as answered "ok" once the bot asks for the events after it, and each
text's numbers must follow the order of the events.

With -url, start the bot with the settings this command prints on stdout
(its VK_API_URL is this command's fake VK API): the command waits -wait
for the bot to answer and to send its reply to one probe message to the
fake VK API, and says why if it does not (a bot in dry-run, or one
sending to another VK_API_URL, would leave every answer missing). Fix the
fake API's address with -vk-addr to start the bot first. With -spawn, this command starts the
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
` + FaultHelp() + `
Flags:
`

// CountersUsage is the help of `vkcounter loadtest counters`, before its
// flags.
const CountersUsage = `Usage: vkcounter loadtest counters (-addr HOST:PORT | -spawn) [flags]

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

// SpawnKeyPrefix is the KEY_PREFIX of a service the callback tool starts,
// unless -key-prefix says otherwise: a run against a shared Redis leaves
// the keys of the service that uses it alone.
const SpawnKeyPrefix = "vkc-loadtest:"

// launch is how a tool reaches the service: started for the run (-spawn)
// or already running; and whether targets may be remote.
type launch struct {
	Spawn       bool
	Bin         string
	AllowRemote bool
}

func (l *launch) bind(fs *flag.FlagSet) {
	fs.BoolVar(&l.AllowRemote, "allow-remote", false, "allow targets outside the loopback range")
	fs.BoolVar(&l.Spawn, "spawn", false, "start the service (vkcounter serve) for the run and stop it after")
	fs.StringVar(&l.Bin, "bin", "", "the vkcounter binary -spawn starts (default: this program)")
}

// start spawns the service with env, or returns nil without -spawn.
func (l *launch) start(ctx context.Context, env map[string]string) (*Service, error) {
	if !l.Spawn {
		return nil, nil
	}
	return Spawn(ctx, l.Bin, env)
}

// stop stops a spawned service (svc may be nil), reporting a failed exit
// on stderr: the run's report still decides the outcome.
func stop(svc *Service, tool string, stderr io.Writer) {
	if svc == nil {
		return
	}
	if err := svc.Stop(); err != nil {
		fmt.Fprintf(stderr, "vkcounter loadtest %s: %s\n", tool, strings.TrimRight(err.Error(), "\n"))
	}
}

// A CallbackCommand is `vkcounter loadtest callback`: the run's options and
// where the bot, its Redis and the fake VK API are. Bind its flags, check
// them with Validate, then Run.
type CallbackCommand struct {
	Options CallbackOptions
	launch
	// VKAddr is the fake VK API's listen address.
	VKAddr string
	// Redis and RedisCluster are the bot's Redis (at most one; neither:
	// the spawned bot's embedded Redis), KeyPrefix its KEY_PREFIX (empty:
	// vkc:, or SpawnKeyPrefix with Spawn), Normalize its NORMALIZE.
	Redis, RedisCluster, KeyPrefix string
	Normalize                      bool
	// NoProbe skips the probe message with URL (Options.Probe): for a
	// handler that sends no replies, such as bench/floor.
	NoProbe bool
	// Faults is the fault schedule as given (see ParseFaults), ProxyAddr
	// the listen address of the Redis fault proxy.
	Faults, ProxyAddr string
	// Prefill stores n occurrences of every text, older than the window,
	// as the bot run with env counts them (`vkcounter prefill` with env's
	// settings, the others from this process's environment); needed for
	// Options.Expired.
	Prefill func(ctx context.Context, env map[string]string, texts []string, n int) error
}

// Bind defines the tool's flags on fs, with their defaults.
func (c *CallbackCommand) Bind(fs *flag.FlagSet) {
	o := &c.Options
	c.launch.bind(fs)
	fs.StringVar(&o.URL, "url", "", "the bot's webhook `URL`, e.g. http://127.0.0.1:8080/callback")
	fs.BoolVar(&o.LongPoll, "longpoll", false, "deliver the events through the fake API's Bots Long Poll server (the bot runs with VK_MODE=longpoll) instead of the webhook")
	fs.StringVar(&c.VKAddr, "vk-addr", "127.0.0.1:0", "listen address of the fake VK API")
	fs.IntVar(&o.GroupID, "group", DefaultGroupID, "community id the bot serves")
	fs.StringVar(&o.Secret, "secret", "loadtest", "the community's Callback API secret")
	fs.IntVar(&o.Texts, "texts", DefaultTexts, "distinct texts")
	fs.IntVar(&o.PerText, "per-text", DefaultPerText, "events per text")
	fs.IntVar(&o.Peers, "peers", 0, "conversations sending the events (0 = one per event, every reply attributed beyond doubt)")
	fs.IntVar(&o.Concurrency, "concurrency", DefaultConcurrency, "requests in flight")
	fs.Float64Var(&o.Rate, "rate", 0, "events per second (0 = as fast as possible)")
	fs.DurationVar(&o.Duration, "duration", 0, "stop posting after this long (0 = when every event is posted)")
	fs.Float64Var(&o.RetryFraction, "retry-fraction", 0, "share of events posted again with the same event_id and X-Retry-Counter")
	fs.Float64Var(&o.NoEventID, "no-event-id", 0, "share of events posted without event_id, to be recognised by the message's identity")
	fs.IntVar(&o.Expired, "expired", 0, "store this many occurrences of every text, older than the window, before the run (as vkcounter prefill, with the bot's settings; 0 = none)")
	fs.StringVar(&c.Redis, "redis", "", "the bot's Redis `URL`, for -expired; with -spawn, the bot is given it")
	fs.StringVar(&c.RedisCluster, "redis-cluster", "", "the bot's Redis Cluster, comma-separated host:port, instead of -redis")
	fs.StringVar(&c.KeyPrefix, "key-prefix", "", "the bot's KEY_PREFIX (empty: vkc:, or "+SpawnKeyPrefix+" with -spawn, so a run never writes into a service's own keys)")
	fs.DurationVar(&o.Window, "window", 0, "the bot's WINDOW (0 = ask the bot's /stats at -stats-url; with -spawn, 24h)")
	fs.StringVar(&o.StatsURL, "stats-url", "http://127.0.0.1:9090/stats", "the bot's /stats `URL` (on its ADMIN_ADDR), read for its WINDOW")
	fs.BoolVar(&c.Normalize, "normalize", false, "the bot's NORMALIZE")
	fs.BoolVar(&c.NoProbe, "no-probe", false, "with -url, post no probe message first: for a handler that sends no replies (bench/floor)")
	fs.DurationVar(&o.Wait, "wait", 2*time.Minute, "how long to wait for the bot to answer (and, with -url, to send its reply to a probe message to the fake VK API) before the run (0 = it must answer at once)")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "time limit of one webhook request")
	fs.DurationVar(&o.ReplyTimeout, "reply-timeout", DefaultReplyTimeout, "how long to wait for the replies after the last event")
	fs.IntVar(&o.MaxAttempts, "attempts", DefaultMaxAttempts, "times an event is posted before it counts as not counted")
	fs.StringVar(&c.Faults, "faults", "", "fault `SCHEDULE`, e.g. redis-stall@2s+10s,vk-down@5s+12s (see above)")
	fs.StringVar(&c.ProxyAddr, "redis-proxy-addr", "127.0.0.1:0", "listen address of the proxy in front of -redis, for Redis faults")
	fs.BoolVar(&o.StrictSends, "strict-sends", false, "a reply sent twice with one random_id is a problem (always, under -faults)")
}

// Validate parses the fault schedule into the options and checks every
// value before anything starts, each bad one in an error of its own named
// by its flag; Options.Validate is part of it.
func (c *CallbackCommand) Validate() error {
	faults, err := ParseFaults(c.Faults)
	if err != nil {
		return fmt.Errorf("-faults: %w", err)
	}
	c.Options.Faults = faults
	o := c.options()
	errs := []error{o.Validate()}
	bad := func(err error) { errs = append(errs, err) }
	redisFaults := c.redisFaults()
	switch {
	case o.LongPoll && o.URL != "":
		bad(errors.New("-longpoll takes no -url: the bot asks the fake VK API for the events"))
	case !o.LongPoll && (o.URL == "") == !c.Spawn:
		bad(errors.New("give -url or -spawn (one of them)"))
	}
	switch {
	case c.Redis != "" && c.RedisCluster != "":
		bad(errors.New("give -redis or -redis-cluster, not both"))
	case redisFaults && c.Redis == "":
		bad(errors.New("-faults: Redis faults need the bot's Redis as -redis (a single server: the proxy can stand neither in front of a cluster nor of the embedded Redis)"))
	case o.Expired > 0 && c.Redis == "" && c.RedisCluster == "":
		bad(errors.New("-expired writes into the bot's Redis: give -redis or -redis-cluster"))
	}
	bad(checkRedis(c.Redis, c.RedisCluster, c.AllowRemote))
	bad(checkListenAddr("vk-addr", c.VKAddr))
	if redisFaults && c.Redis != "" {
		if u, err := url.Parse(c.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			bad(errors.New("-faults: Redis faults need -redis as a redis:// or rediss:// URL with a host"))
		}
		bad(checkListenAddr("redis-proxy-addr", c.ProxyAddr))
	}
	return errors.Join(errs...)
}

func (c *CallbackCommand) redisFaults() bool {
	return slices.ContainsFunc(c.Options.Faults, Fault.Redis)
}

// options are the run's options as the flags give them: a spawned bot's
// window is 24h unless -window says otherwise.
func (c *CallbackCommand) options() CallbackOptions {
	o := c.Options
	o.AllowRemote = c.AllowRemote
	if c.Spawn && o.Window == 0 {
		o.Window = 24 * time.Hour
	}
	return o
}

// Run makes the run Validate accepted: it starts the fake VK API, the
// Redis fault proxy and, with Spawn, the bot wired to them (or, with URL,
// prints on say the command to start the bot with and waits up to Wait
// for it), runs RunCallback with progress on stderr, and stops what it
// started.
func (c *CallbackCommand) Run(ctx context.Context, say, stderr io.Writer) (*Report, error) {
	o := c.options()
	o.Progress = stderr
	botRedis := c.Redis // what the bot is told
	if c.redisFaults() {
		proxy, proxied, err := ProxyRedis(c.Redis, c.ProxyAddr)
		if err != nil {
			return nil, err
		}
		defer proxy.Close()
		o.RedisProxy, botRedis = proxy, proxied
	}
	vk, err := vktest.Start(vktest.Options{Addr: c.VKAddr})
	if err != nil {
		return nil, err
	}
	defer vk.Close()
	env := c.env(vk, botRedis, o.Window)
	svc, err := c.start(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stop(svc, "callback", stderr)
	switch {
	case svc == nil:
		probe := " and send its reply to a probe message here"
		if c.NoProbe {
			probe = " (-no-probe: no reply is waited for)"
		}
		fmt.Fprintf(say, "fake VK API at %s; start the bot with:\n  %s ./vkcounter serve\nwaiting up to %v (-wait) for it to answer at %s%s\n",
			vk.MethodURL(), envLine(env), o.Wait, o.URL, probe)
		o.Probe = !c.NoProbe
	case !o.LongPoll:
		o.URL = "http://" + svc.HTTPAddr() + "/callback"
	}
	o.VK = vk
	if o.Expired > 0 {
		o.Prefill = func(ctx context.Context, texts []string, n int, window time.Duration) error {
			own := maps.Clone(env)
			own["REDIS_URL"], own["REDIS_CLUSTER"], own["VK_GROUPS"], own["WINDOW"] = botRedis, c.RedisCluster, "", window.String()
			return c.Prefill(ctx, own, texts, n)
		}
	}
	return RunCallback(ctx, o)
}

// env is the bot's settings for the run: the fake VK API, the community,
// the Redis (botRedis: through the fault proxy), and with Spawn the window
// and ports of its own.
func (c *CallbackCommand) env(vk *vktest.Server, botRedis string, window time.Duration) map[string]string {
	o := c.Options
	prefix := c.KeyPrefix
	if prefix == "" {
		prefix = "vkc:"
		if c.Spawn {
			prefix = SpawnKeyPrefix
		}
	}
	env := map[string]string{
		"VK_API_URL": vk.MethodURL(), "VK_TOKEN": "loadtest", "VK_GROUP_ID": strconv.Itoa(o.GroupID),
		"VK_SECRET": o.Secret, "VK_RATE": "1000000", "KEY_PREFIX": prefix, "NORMALIZE": strconv.FormatBool(c.Normalize),
	}
	if o.LongPoll {
		env["VK_MODE"] = "longpoll"
	}
	if o.Peers > 0 {
		// Several events share a dialog: only a quote tells their
		// replies apart (see attributor).
		env["REPLY_QUOTE"] = "all"
	}
	if botRedis != "" || c.Spawn { // empty: the spawned bot's embedded Redis
		env["REDIS_URL"] = botRedis
	}
	if c.RedisCluster != "" || c.Spawn {
		env["REDIS_CLUSTER"] = c.RedisCluster
	}
	if c.Spawn {
		env["WINDOW"] = window.String()
		env["VK_GROUPS"], env["HTTP_ADDR"], env["COUNTER_ADDR"] = "", "127.0.0.1:0", "off"
		// A spawned bot may use its embedded Redis even where the image's
		// deployment settings are set.
		env["REQUIRE_REDIS"] = "false"
	}
	return env
}

// A CountersCommand is `vkcounter loadtest counters`: the run's options and
// where the server is. Bind its flags, check them with Validate, then Run.
type CountersCommand struct {
	Options CountersOptions
	launch
	// Ops is the workload list as given (see ParseOps), Maximum the
	// shared maximum as given (it must fit 4 bytes).
	Ops     string
	Maximum uint
}

// Bind defines the tool's flags on fs, with their defaults.
func (c *CountersCommand) Bind(fs *flag.FlagSet) {
	o := &c.Options
	c.launch.bind(fs)
	fs.StringVar(&o.Addr, "addr", "", "the counter server(s), comma-separated `HOST:PORT,...`, e.g. 127.0.0.1:11215 (or -spawn)")
	fs.StringVar(&c.Ops, "op", string(OpAcquire), "workloads, comma-separated: acquire, get, noop, hit, visit, whit, uadd")
	fs.IntVar(&o.Conns, "conns", DefaultConns, fmt.Sprintf("connections (at most %d)", MaxConns))
	fs.IntVar(&o.Depth, "depth", DefaultDepth, fmt.Sprintf("requests in flight per connection (pipelining; at most %d)", MaxDepth))
	fs.IntVar(&o.Names, "names", DefaultNames, "shared counter names of the acquire workload")
	fs.UintVar(&c.Maximum, "max", 0, "check a shared maximum of `N` across the servers (with -op acquire alone; 0 = off)")
	fs.Int64Var(&o.Requests, "requests", DefaultRequests, "requests to send in all; 0 = no limit, run for -duration")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (0 = no limit, stop after -requests)")
	fs.DurationVar(&o.Timeout, "timeout", DefaultCounterTimeout, "time limit for connecting and for each response")
}

// Validate parses the workloads and the maximum into the options and
// checks every value before anything starts, each bad one in an error of
// its own named by its flag; Options.Validate is part of it.
func (c *CountersCommand) Validate() error {
	ops, err := ParseOps(c.Ops)
	if err != nil {
		return fmt.Errorf("-op: %w", err)
	}
	if c.Maximum > math.MaxUint32 {
		return errors.New("-max must fit in 4 bytes")
	}
	c.Options.Ops, c.Options.Maximum, c.Options.AllowRemote = ops, uint32(c.Maximum), c.AllowRemote
	var target error
	if (c.Options.Addr == "") == !c.Spawn {
		target = errors.New("give -addr HOST:PORT or -spawn (one of them)")
	}
	return errors.Join(c.Options.Validate(), target)
}

// Run makes the run Validate accepted: with Spawn it starts the service
// with a counter port of its own, runs RunCounters with progress on
// stderr, and stops what it started. It has nothing to say.
func (c *CountersCommand) Run(ctx context.Context, _, stderr io.Writer) (*Report, error) {
	o := c.Options
	o.Progress = stderr
	svc, err := c.start(ctx, map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "COUNTER_ADDR": "127.0.0.1:0", "REDIS_URL": "", "REDIS_CLUSTER": "",
		"VK_TOKEN": "", "VK_GROUP_ID": "", "VK_GROUPS": "", "VK_SECRET": "", "REQUIRE_REDIS": "false", "REQUIRE_VK_TOKEN": "false",
	})
	if err != nil {
		return nil, err
	}
	defer stop(svc, "counters", stderr)
	if svc != nil {
		if a := svc.CounterAddr(); a == "" || a == "off" {
			return nil, errors.New("the spawned service does not say where its counter port is")
		}
		o.Addr = svc.CounterAddr()
	}
	return RunCounters(ctx, o)
}

// envLine prints env as shell assignments, sorted.
func envLine(env map[string]string) string {
	keys := slices.Sorted(maps.Keys(env))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + shellQuote(env[k])
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for sh when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/,@%+=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
