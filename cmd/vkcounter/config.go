package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/toptexts"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// Config is everything `vkcounter serve` can be told. Each field is a flag
// whose default comes from an environment variable (see settings).
type Config struct {
	HTTPAddr     string
	AdminAddr    string
	CallbackPath string
	RedisURL     string
	RedisCluster string
	RequireRedis bool
	KeyPrefix    string
	Window       time.Duration
	Normalize    bool
	TopTexts     int

	VKToken        string
	RequireVKToken bool
	VKGroupID      int
	VKSecret       string
	VKConfirmation string
	VKGroups       string
	VKAPIURL       string
	VKMode         string
	ReplyQuote     string
	LongPollWait   time.Duration
	VKTimeout      time.Duration
	VKRate         float64
	OutboxMaxLen   int
	ClaimAfter     time.Duration
	VKBatch        int

	LogLevel        string
	LogFormat       string
	MaxBodyBytes    int64
	ShutdownTimeout time.Duration
	WebhookTimeout  time.Duration
	RedisTimeout    time.Duration

	HTTPMaxConnections int

	CounterAddr           string
	CounterMaxConnections int
	CounterBuckets        int
	CounterStatsInterval  int
	ResourceStore         string
	ResourceLease         time.Duration
	ResourceMaxMemory     int64
	ResourceMaxHoldings   int

	CountersStore         string
	CountersRedisURL      string
	CountersRedisCluster  string
	CountersRedisHeadroom int
	CountersMaxKeys       int
	CountersDir           string
	CountersFileLevels    int
	CountersTimeout       time.Duration
	CountersHTTPToken     string

	CountersMemoryMaxNames int
	CountersMemoryMaxBytes int64
}

// memoryLimits are the defaults of COUNTERS_MEMORY_MAX_NAMES and
// COUNTERS_MEMORY_MAX_BYTES.
var memoryLimits = memcap.Limits{MaxNames: memcap.DefaultMaxNames, MaxBytes: memcap.DefaultMaxBytes}

// The VK_MODE values: how events arrive.
const (
	// ModeCallback has VK post events to the webhook.
	ModeCallback = "callback"
	// ModeLongPoll takes events from VK's Bots Long Poll API.
	ModeLongPoll = "longpoll"
)

// A setting binds one environment variable to one flag.
type setting struct {
	env  string
	def  string
	help string
	bind func(fs *flag.FlagSet, name, help string)
}

func settings(c *Config) []setting {
	str := func(p *string) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, h string) { fs.StringVar(p, n, "", h) }
	}
	dur := func(p *time.Duration) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, h string) { fs.DurationVar(p, n, 0, h) }
	}
	num := func(p *int) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, h string) { fs.IntVar(p, n, 0, h) }
	}
	boolVar := func(p *bool) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, h string) { fs.BoolVar(p, n, false, h) }
	}
	return []setting{
		{"HTTP_ADDR", ":8080", "address of the public HTTP server: the webhook, /counters/ and /healthz", str(&c.HTTPAddr)},
		{"ADMIN_ADDR", "127.0.0.1:9090", "address of the admin HTTP server: the status page (/), /metrics, /stats, /texts, /readyz and /healthz; keep it private", str(&c.AdminAddr)},
		{"CALLBACK_PATH", "/callback", "path VK posts Callback API events to", str(&c.CallbackPath)},
		{"REDIS_URL", "", "redis:// or rediss:// URL; empty (and no REDIS_CLUSTER) starts an embedded in-memory Redis", str(&c.RedisURL)},
		{"REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses (host:port), instead of REDIS_URL", str(&c.RedisCluster)},
		{"REQUIRE_REDIS", "false", "refuse to start without REDIS_URL or REDIS_CLUSTER, instead of starting the embedded Redis (the Docker image sets true: a deployment must not count on its own)", boolVar(&c.RequireRedis)},
		{"REDIS_TIMEOUT", durDefault(redisconn.DefaultTimeout), "longest wait for one Redis command; longer than a stall (a failover, a slow fork), so a late answer is still used", dur(&c.RedisTimeout)},
		{"KEY_PREFIX", freq.DefaultPrefix, "prefix of every Redis key the service writes (to share a Redis with other apps)", str(&c.KeyPrefix)},
		{"WINDOW", durDefault(freq.DefaultWindow), "sliding window a message is counted in (Go duration, whole seconds)", dur(&c.Window)},
		{"NORMALIZE", "false", "treat messages differing only in case and white space as the same", boolVar(&c.Normalize)},
		{"TOP_TEXTS", "0", "keep in this process the N texts with the highest count this instance saw in the window (their counts as its replies carried them), for the status page and /stats; no Redis command; 0 = off, at most " + strconv.Itoa(toptexts.MaxN), num(&c.TopTexts)},
		{"VK_TOKEN", "", "community token(s), comma-separated; empty = dry-run (replies are logged, not sent)", str(&c.VKToken)},
		{"REQUIRE_VK_TOKEN", "false", "refuse to start without a token for every community (no dry-run), and keep /readyz failing until VK accepts each token with the messages right (the Docker image sets true)", boolVar(&c.RequireVKToken)},
		{"VK_GROUP_ID", "", "community id; may be empty in dry-run, which then serves a demo community 1", num(&c.VKGroupID)},
		{"VK_SECRET", "", "Callback API secret key of the community", str(&c.VKSecret)},
		{"VK_CONFIRMATION", "", "string the confirmation event must return; empty with a token: asked of VK at each confirmation event (the last code VK gave if it does not answer within 1s), which is valid only for a Callback server added through the API (setup); for one added by hand, the code its settings show", str(&c.VKConfirmation)},
		{"VK_GROUPS", "", `several communities as JSON: [{"group_id":1,"secret":"…","confirmation":"…","token":"t1,t2"},…] (replaces the four VK_* above)`, str(&c.VKGroups)},
		{"VK_API_URL", "https://api.vk.com/method/", "VK API base URL (point at a fake API for tests and load tests; in longpoll mode groups.getLongPollServer is asked there too)", str(&c.VKAPIURL)},
		{"VK_MODE", ModeCallback, "how events arrive: callback (VK posts them to CALLBACK_PATH) or longpoll (the service asks VK's Bots Long Poll API; no public URL needed, every community needs a token)", str(&c.VKMode)},
		{"REPLY_QUOTE", "chats", "which replies quote the message they answer: chats (group chats, with messages.send's forward), all (private dialogs too, with reply_to where the message id is known) or off", str(&c.ReplyQuote)},
		{"LONGPOLL_WAIT", durDefault(longpoll.DefaultWait), "how long one Bots Long Poll request waits for events (whole seconds, 1s to " + strconv.Itoa(int(longpoll.MaxWait/time.Second)) + "s)", dur(&c.LongPollWait)},
		{"VK_TIMEOUT", durDefault(vkapi.DefaultTimeout), "timeout of one VK API call", dur(&c.VKTimeout)},
		{"VK_RATE", strconv.Itoa(bot.DefaultRatePerToken), "VK API calls per second per token, in total over every instance sending with it (paced in Redis, 5 % spare)", func(fs *flag.FlagSet, n, h string) { fs.Float64Var(&c.VKRate, n, 0, h) }},
		{"VK_BATCH", strconv.Itoa(bot.MaxBatch), "most replies sent in one VK call (several go as one execute; 1 disables batching)", num(&c.VKBatch)},
		{"OUTBOX_MAX_LEN", strconv.Itoa(outbox.DefaultMaxLen), "replies that may wait per community in the outbox before the webhook answers 503", num(&c.OutboxMaxLen)},
		{"OUTBOX_CLAIM_AFTER", durDefault(outbox.DefaultClaimAfter), "how long a reply may stay with a sender that stopped (a crashed instance) before another takes it over", dur(&c.ClaimAfter)},
		{"LOG_LEVEL", "info", "trace, debug, info, warn or error", str(&c.LogLevel)},
		{"LOG_FORMAT", "json", "json or console", str(&c.LogFormat)},
		{"MAX_BODY_BYTES", strconv.FormatInt(callback.DefaultMaxBodyBytes, 10), "largest webhook request body accepted", func(fs *flag.FlagSet, n, h string) { fs.Int64Var(&c.MaxBodyBytes, n, 0, h) }},
		{"WEBHOOK_TIMEOUT", durDefault(callback.DefaultTimeout), "longest a webhook request waits for Redis before answering 503 with Retry-After (VK then re-delivers; the late result is recognised)", dur(&c.WebhookTimeout)},
		{"HTTP_MAX_CONNECTIONS", "4096", "most connections each HTTP server (HTTP_ADDR, ADMIN_ADDR) serves at once; more are answered 503 with Retry-After and closed (lowered at start if the open-file limit leaves no room); 0 = unlimited", num(&c.HTTPMaxConnections)},
		{"SHUTDOWN_TIMEOUT", "10s", "how long SIGTERM waits for in-flight requests and queued replies", dur(&c.ShutdownTimeout)},
		{"COUNTER_ADDR", "127.0.0.1:11215", "counter protocol TCP address (no authentication: keep it loopback or private); off disables the port", str(&c.CounterAddr)},
		{"COUNTER_MAX_CONNECTIONS", "10000", "most counter connections at once (lowered at start if the open-file limit leaves no headroom); 0 = unlimited", num(&c.CounterMaxConnections)},
		{"COUNTER_BUCKETS", strconv.Itoa(resource.DefaultBuckets), "size of the resource counter hash table", num(&c.CounterBuckets)},
		{"COUNTER_STATS_INTERVAL", strconv.Itoa(int(resource.DefaultInterval / time.Second)), "seconds of the epoch-aligned interval for maximum consumption and GC (minimum 10)", num(&c.CounterStatsInterval)},
		{"RESOURCE_STORE", counters.StoreMemory, "where the resource counters (acquire/release) live: memory (this process; run one instance or use ring clients) or redis (the service's Redis: one maximum per name for every instance)", str(&c.ResourceStore)},
		{"RESOURCE_LEASE", durDefault(resource.DefaultLease), "with RESOURCE_STORE=redis: how long a dead instance's holdings outlive it; an instance that cannot renew its leases closes its holding connections first; a Redis that lost its data (or a new deployment) refuses acquires this long; the same on every instance (minimum 1s)", dur(&c.ResourceLease)},
		{"RESOURCE_MAX_HOLDINGS", strconv.Itoa(resource.DefaultMaxHoldings), "with RESOURCE_STORE=redis: most counter names one connection holds at once; an acquire of one more is refused (0x82)", num(&c.ResourceMaxHoldings)},
		{"RESOURCE_MAX_MEMORY", strconv.FormatInt(resource.DefaultMaxMemory, 10), "with RESOURCE_STORE=memory: estimated bytes the resource counters may take (names, counters, holdings); when full, counters released to 0 are deleted first, oldest first, then a new counter or holding is refused (0x82)", func(fs *flag.FlagSet, n, h string) { fs.Int64Var(&c.ResourceMaxMemory, n, 0, h) }},
		{"COUNTERS_STORE", counters.StoreRedis, "where access, participant, window and unique counters live: redis (the bot's Redis, embedded or real, shared by all instances), memory (this process) or file (BBS files under COUNTERS_DIR for access and participant counters; window and unique counters then in this process)", str(&c.CountersStore)},
		{"COUNTERS_REDIS_URL", "", "redis:// or rediss:// URL of a Redis for the counters alone (COUNTERS_STORE=redis and RESOURCE_STORE=redis); empty = the bot's Redis. Recommended where the counter port or /counters/ serve other apps: their counters then cannot fill the bot's Redis", str(&c.CountersRedisURL)},
		{"COUNTERS_REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses for the counters alone, instead of COUNTERS_REDIS_URL", str(&c.CountersRedisCluster)},
		{"COUNTERS_REDIS_HEADROOM", "20", "percent of the counters' Redis maxmemory kept free (for the bot, when they share it): past maxmemory less this, the counter stores neither create names nor grow them (new participant keys, window seconds, unique registers; port: Out of memory, HTTP 507; existing data keeps counting where it does not grow); 0 disables; nothing is refused when Redis has no maxmemory", num(&c.CountersRedisHeadroom)},
		{"COUNTERS_PARTICIPANT_MAX_KEYS", strconv.Itoa(participant.DefaultMaxKeys), "most keys one participant counter name holds, in every store (the default: about 44 MB of Redis, 37 MB in memory, with 255-byte keys); a visit that would pass it is refused (port 0x82, HTTP 507) and changes nothing", num(&c.CountersMaxKeys)},
		{"COUNTERS_DIR", "", "directory of the file store: count/ holds the access counters (count0.dat…), bbs.cnt the participants; only with COUNTERS_STORE=file", str(&c.CountersDir)},
		{"COUNTERS_FILE_LEVELS", strconv.Itoa(access.DefaultLevels), "count files per access counter in the file store (the BBS's COUNTLEVEL, 1 to " + strconv.Itoa(access.MaxLevels) + ")", num(&c.CountersFileLevels)},
		{"COUNTERS_HTTP_TOKEN", "", "when set, the /counters/ HTTP API requires Authorization: Bearer <token>; when empty, it answers loopback clients only", str(&c.CountersHTTPToken)},
		{"COUNTERS_TIMEOUT", durDefault(counters.DefaultStoreTimeout), "time limit of one access, participant, window or unique store call (counter port, HTTP API, bot)", dur(&c.CountersTimeout)},
		{"COUNTERS_MEMORY_MAX_NAMES", strconv.Itoa(memoryLimits.MaxNames), "most names each kind of counter kept in this process holds (access, participant, window, unique, each apart); a new name past it is refused (port 0x82, HTTP 507)", num(&c.CountersMemoryMaxNames)},
		{"COUNTERS_MEMORY_MAX_BYTES", strconv.FormatInt(memoryLimits.MaxBytes, 10), "estimated bytes each kind of counter kept in this process may take (each apart): new names are refused past 7/8 of it, new participant keys, window seconds and unique registers past all of it", func(fs *flag.FlagSet, n, h string) { fs.Int64Var(&c.CountersMemoryMaxBytes, n, 0, h) }},
	}
}

// durDefault writes a package's default duration as the settings table
// shows it: 24h, 30s, 1m30s (not 24h0m0s).
func durDefault(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// flagName turns HTTP_ADDR into http-addr.
func flagName(env string) string { return strings.ReplaceAll(strings.ToLower(env), "_", "-") }

// parseConfig reads the serve configuration: defaults, then environment
// variables, then flags. Bad values are errors naming the variable and
// saying what is expected. On -h it prints the commands and every setting
// to usageOut and returns flag.ErrHelp.
func parseConfig(args []string, getenv func(string) string, usageOut io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	return parseConfigFlags(fs, args, getenv, func(list []setting) {
		printCommands(usageOut)
		fmt.Fprintln(usageOut)
		printSettings(usageOut, list)
	})
}

// parseConfigFlags is parseConfig for a command whose own flags are
// already bound to fs; help prints its usage on -h.
func parseConfigFlags(fs *flag.FlagSet, args []string, getenv func(string) string, help func([]setting)) (Config, error) {
	c, rest, err := parseConfigArgs(fs, args, getenv, help)
	if len(rest) > 0 {
		return c, fmt.Errorf("unexpected argument %q", rest[0])
	}
	return c, err
}

// parseConfigArgs is parseConfigFlags for a command that takes arguments
// after its flags: it returns them.
func parseConfigArgs(fs *flag.FlagSet, args []string, getenv func(string) string, help func([]setting)) (Config, []string, error) {
	var c Config
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	list := settings(&c)
	for _, s := range list {
		s.bind(fs, flagName(s.env), s.help)
	}
	explainValues(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(list)
		}
		return c, nil, err
	}
	// A flag given overrides its variable, which is then not even parsed:
	// the flags are parsed first, and only the settings without one are
	// set from the environment or the default.
	given := givenFlags(fs)
	for _, s := range list {
		if given[flagName(s.env)] {
			continue
		}
		v, src := s.def, "default"
		if e := getenv(s.env); e != "" {
			v, src = e, "environment"
		}
		if v == "" {
			continue
		}
		if err := fs.Set(flagName(s.env), v); err != nil {
			return c, nil, fmt.Errorf("%s (%s) %q: %v", s.env, src, v, err)
		}
	}
	return c, fs.Args(), c.validate()
}

func printSettings(w io.Writer, list []setting) {
	fmt.Fprintln(w, "Usage: vkcounter [serve] [flags]")
	fmt.Fprintln(w, "\nRuns the service. Every setting is an environment variable; the flag of the same name overrides it.")
	fmt.Fprintln(w)
	printSettingsTable(w, list)
}

// printSettingsTable lists every setting with its flag and default.
func printSettingsTable(w io.Writer, list []setting) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tFLAG\tDEFAULT\tMEANING")
	for _, s := range list {
		def := s.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "%s\t-%s\t%s\t%s\n", s.env, flagName(s.env), def, s.help)
	}
	tw.Flush()
}

// validate checks every setting, each bad one in an error of its own;
// the limits are the owning packages' constants.
func (c *Config) validate() error {
	errs := append(c.validateRedis(), c.validateService(), c.validateVK(), c.validateCounterPort(), c.validateCounters(), c.validateCommunities())
	return errors.Join(errs...)
}

// positive is the check of a setting that must be above 0.
func positive[T int | int64 | float64 | time.Duration](env string, v T) error {
	if v <= 0 {
		return fmt.Errorf("%s: must be positive", env)
	}
	return nil
}

// validateService checks the window, the webhook, the outbox, the time
// limits and the logs.
func (c *Config) validateService() error {
	var errs []error
	if c.Window < time.Second || c.Window%time.Second != 0 {
		errs = append(errs, fmt.Errorf("WINDOW %s: must be whole seconds, at least 1s", c.Window))
	}
	if !strings.HasPrefix(c.CallbackPath, "/") {
		errs = append(errs, fmt.Errorf("CALLBACK_PATH %q: must start with /", c.CallbackPath))
	}
	if c.ClaimAfter < 100*time.Millisecond {
		errs = append(errs, errors.New("OUTBOX_CLAIM_AFTER: must be at least 100ms"))
	}
	if c.TopTexts < 0 || c.TopTexts > toptexts.MaxN {
		errs = append(errs, fmt.Errorf("TOP_TEXTS %d: must be 0 (off) to %d", c.TopTexts, toptexts.MaxN))
	}
	if c.HTTPMaxConnections < 0 {
		errs = append(errs, fmt.Errorf("HTTP_MAX_CONNECTIONS %d: must be >= 0", c.HTTPMaxConnections))
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT %q: must be json or console", c.LogFormat))
	}
	return errors.Join(append(errs, positive("OUTBOX_MAX_LEN", c.OutboxMaxLen), positive("MAX_BODY_BYTES", c.MaxBodyBytes),
		positive("SHUTDOWN_TIMEOUT", c.ShutdownTimeout), positive("WEBHOOK_TIMEOUT", c.WebhookTimeout),
		positive("REDIS_TIMEOUT", c.RedisTimeout))...)
}

// validateVK checks the settings of VK's side: the API, the mode, the
// replies.
func (c *Config) validateVK() error {
	var errs []error
	if u, err := url.Parse(c.VKAPIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.HasSuffix(u.Path, "/") {
		errs = append(errs, fmt.Errorf("VK_API_URL %q: must be an http(s) URL ending in /", c.VKAPIURL))
	}
	switch c.VKMode {
	case ModeCallback:
	case ModeLongPoll:
		errs = append(errs, c.validateLongPoll())
	default:
		errs = append(errs, fmt.Errorf("VK_MODE %q: must be callback or longpoll", c.VKMode))
	}
	if _, err := bot.ParseQuote(c.ReplyQuote); err != nil {
		errs = append(errs, fmt.Errorf("REPLY_QUOTE %q: must be chats, all or off", c.ReplyQuote))
	}
	if c.LongPollWait < time.Second || c.LongPollWait > longpoll.MaxWait || c.LongPollWait%time.Second != 0 {
		errs = append(errs, fmt.Errorf("LONGPOLL_WAIT %s: must be whole seconds, 1s to %ds", c.LongPollWait, longpoll.MaxWait/time.Second))
	}
	if c.VKBatch < 1 || c.VKBatch > bot.MaxBatch {
		errs = append(errs, fmt.Errorf("VK_BATCH %d: must be 1 to %d", c.VKBatch, bot.MaxBatch))
	}
	return errors.Join(append(errs, positive("VK_TIMEOUT", c.VKTimeout), positive("VK_RATE", c.VKRate))...)
}

// validateLongPoll checks that VK_MODE=longpoll has a token for every
// community.
func (c *Config) validateLongPoll() error {
	cs, err := c.Communities()
	if err != nil {
		return nil // said by validateCommunities
	}
	if c.demo() {
		return errors.New("VK_MODE=longpoll needs VK_GROUP_ID and VK_TOKEN (or VK_GROUPS, with a token for each community)")
	}
	var errs []error
	for _, g := range cs {
		if len(g.Tokens()) == 0 {
			errs = append(errs, fmt.Errorf("VK_MODE=longpoll: community %d has no token (VK_TOKEN or the token of VK_GROUPS); long poll needs one", g.GroupID))
		}
	}
	return errors.Join(errs...)
}

// validateCommunities checks the communities, and with REQUIRE_VK_TOKEN
// that each has a token.
func (c *Config) validateCommunities() error {
	cs, err := c.Communities()
	if err != nil || !c.RequireVKToken {
		return err
	}
	var errs []error
	for _, g := range cs {
		if len(g.Tokens()) == 0 {
			errs = append(errs, fmt.Errorf("REQUIRE_VK_TOKEN=true: community %d has no token (set VK_GROUP_ID and VK_TOKEN, or a token for each community in VK_GROUPS); dry-run is refused", g.GroupID))
		}
	}
	return errors.Join(errs...)
}

// validateCounterPort checks the COUNTER_* and RESOURCE_* settings.
func (c *Config) validateCounterPort() error {
	var errs []error
	if c.CounterStatsInterval < 10 {
		errs = append(errs, fmt.Errorf("COUNTER_STATS_INTERVAL %d: minimum is 10 seconds", c.CounterStatsInterval))
	}
	if c.ResourceMaxHoldings <= 0 {
		errs = append(errs, fmt.Errorf("RESOURCE_MAX_HOLDINGS %d: must be > 0", c.ResourceMaxHoldings))
	}
	if c.CounterMaxConnections < 0 || c.CounterBuckets <= 0 {
		errs = append(errs, errors.New("COUNTER_MAX_CONNECTIONS must be >= 0 and COUNTER_BUCKETS > 0"))
	}
	switch c.ResourceStore {
	case counters.StoreMemory, counters.StoreRedis:
	default:
		errs = append(errs, fmt.Errorf("RESOURCE_STORE %q: must be memory or redis", c.ResourceStore))
	}
	if c.ResourceLease < time.Second {
		errs = append(errs, fmt.Errorf("RESOURCE_LEASE %v: minimum is 1s", c.ResourceLease))
	}
	if c.ResourceMaxMemory <= 0 {
		errs = append(errs, fmt.Errorf("RESOURCE_MAX_MEMORY %d: must be positive", c.ResourceMaxMemory))
	}
	return errors.Join(errs...)
}

// validateRedis checks REDIS_URL, REDIS_CLUSTER and REQUIRE_REDIS. A
// malformed value is a usage error naming the variable and the expected
// form; the URL itself is not repeated, as it may hold a password.
func (c *Config) validateRedis() []error {
	errs := checkRedis("REDIS_URL", c.RedisURL, "REDIS_CLUSTER", c.RedisCluster)
	if c.RequireRedis && c.RedisURL == "" && c.RedisCluster == "" {
		errs = append(errs, errors.New("REQUIRE_REDIS=true: REDIS_URL or REDIS_CLUSTER is required (the embedded Redis would keep the counts in this process alone, and lose them when it stops)"))
	}
	return errs
}

// checkRedis checks a pair of Redis settings, a URL and a cluster's seeds,
// named urlVar and clusterVar: at most one is set, and it is well-formed.
// The URL itself is not repeated, as it may hold a password.
func checkRedis(urlVar, url, clusterVar, cluster string) []error {
	var errs []error
	if url != "" && cluster != "" {
		errs = append(errs, fmt.Errorf("%s and %s: give one, not both", urlVar, clusterVar))
	}
	if url != "" {
		if err := redisconn.CheckURL(url); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", urlVar, err))
		}
	}
	if cluster != "" {
		if err := redisconn.CheckCluster(cluster); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", clusterVar, err))
		}
	}
	return errs
}

// countersOwnRedis reports whether the counters have a Redis of their own
// (COUNTERS_REDIS_URL or COUNTERS_REDIS_CLUSTER).
func (c *Config) countersOwnRedis() bool {
	return c.CountersRedisURL != "" || c.CountersRedisCluster != ""
}

// countersInRedis reports whether a counter store is in Redis
// (COUNTERS_STORE=redis or RESOURCE_STORE=redis).
func (c *Config) countersInRedis() bool {
	return c.CountersStore == counters.StoreRedis || c.ResourceStore == counters.StoreRedis
}

// validateCounters checks the COUNTERS_* settings.
func (c *Config) validateCounters() error {
	var errs []error
	switch c.CountersStore {
	case counters.StoreRedis, counters.StoreMemory:
		if c.CountersDir != "" {
			errs = append(errs, fmt.Errorf("COUNTERS_DIR %q: only used with COUNTERS_STORE=file", c.CountersDir))
		}
	case counters.StoreFile:
		if c.CountersDir == "" {
			errs = append(errs, errors.New("COUNTERS_DIR: required with COUNTERS_STORE=file"))
		}
	default:
		errs = append(errs, fmt.Errorf("COUNTERS_STORE %q: must be redis, memory or file", c.CountersStore))
	}
	errs = append(errs, checkRedis("COUNTERS_REDIS_URL", c.CountersRedisURL, "COUNTERS_REDIS_CLUSTER", c.CountersRedisCluster)...)
	if c.countersOwnRedis() && !c.countersInRedis() {
		errs = append(errs, errors.New("COUNTERS_REDIS_URL / COUNTERS_REDIS_CLUSTER: only used with COUNTERS_STORE=redis or RESOURCE_STORE=redis"))
	}
	if c.CountersRedisHeadroom < 0 || c.CountersRedisHeadroom > 99 {
		errs = append(errs, fmt.Errorf("COUNTERS_REDIS_HEADROOM %d: must be 0 (off) to 99 percent", c.CountersRedisHeadroom))
	}
	if c.CountersMaxKeys < 1 {
		errs = append(errs, fmt.Errorf("COUNTERS_PARTICIPANT_MAX_KEYS %d: must be positive", c.CountersMaxKeys))
	}
	if c.CountersFileLevels < 1 || c.CountersFileLevels > access.MaxLevels {
		errs = append(errs, fmt.Errorf("COUNTERS_FILE_LEVELS %d: must be 1 to %d", c.CountersFileLevels, access.MaxLevels))
	}
	if c.CountersMemoryMaxNames < 1 {
		errs = append(errs, fmt.Errorf("COUNTERS_MEMORY_MAX_NAMES %d: must be positive", c.CountersMemoryMaxNames))
	}
	if c.CountersMemoryMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("COUNTERS_MEMORY_MAX_BYTES %d: must be positive", c.CountersMemoryMaxBytes))
	}
	return errors.Join(append(errs, positive("COUNTERS_TIMEOUT", c.CountersTimeout))...)
}

// A Community is one VK community the process serves.
type Community struct {
	GroupID      int    `json:"group_id"`
	Secret       string `json:"secret"`
	Confirmation string `json:"confirmation"`
	Token        string `json:"token"`
}

// Tokens splits the comma-separated token list.
func (c Community) Tokens() []string {
	var out []string
	for _, t := range strings.Split(c.Token, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// demoGroupID is the community served in dry-run when none is configured,
// so that `go run ./cmd/vkcounter` works with nothing else.
const demoGroupID = 1

// demo reports whether no community is configured (no VK_GROUPS, no
// VK_GROUP_ID), so that Communities returns the demo community.
func (c *Config) demo() bool { return c.VKGroups == "" && c.VKGroupID == 0 }

// Communities returns the communities to serve, from VK_GROUPS or from
// VK_GROUP_ID and its companions.
func (c *Config) Communities() ([]Community, error) {
	if c.VKGroups != "" {
		if c.VKGroupID != 0 || c.VKToken != "" || c.VKSecret != "" || c.VKConfirmation != "" {
			return nil, errors.New("VK_GROUPS: replaces VK_GROUP_ID, VK_TOKEN, VK_SECRET and VK_CONFIRMATION; do not set both")
		}
		dec := json.NewDecoder(strings.NewReader(c.VKGroups))
		dec.DisallowUnknownFields()
		var list []Community
		if err := dec.Decode(&list); err != nil {
			return nil, fmt.Errorf("VK_GROUPS: %v", err)
		}
		if len(list) == 0 {
			return nil, errors.New("VK_GROUPS: empty list")
		}
		seen := map[int]bool{}
		for _, g := range list {
			if g.GroupID <= 0 {
				return nil, fmt.Errorf("VK_GROUPS: group_id %d: must be positive", g.GroupID)
			}
			if seen[g.GroupID] {
				return nil, fmt.Errorf("VK_GROUPS: group_id %d listed twice", g.GroupID)
			}
			seen[g.GroupID] = true
		}
		return list, nil
	}
	g := Community{GroupID: c.VKGroupID, Secret: c.VKSecret, Confirmation: c.VKConfirmation, Token: c.VKToken}
	switch {
	case g.GroupID < 0:
		return nil, fmt.Errorf("VK_GROUP_ID %d: must be positive", g.GroupID)
	case g.GroupID == 0 && g.Token != "":
		return nil, errors.New("VK_GROUP_ID: required when VK_TOKEN is set")
	case c.demo():
		g.GroupID = demoGroupID
	}
	return []Community{g}, nil
}

// redisConfig is the Redis named by a REDIS_URL and a REDIS_CLUSTER
// (comma-separated seeds; it wins over the URL), for redisconn.Open.
func redisConfig(url, cluster string, timeout time.Duration) redisconn.Config {
	rc := redisconn.Config{URL: url, Timeout: timeout}
	if cluster != "" {
		rc.Cluster = strings.Split(cluster, ",")
	}
	return rc
}
