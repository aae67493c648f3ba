package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
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
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/toptexts"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// The defaults of the settings no other package owns: the service's own
// addresses, logs, connection limit and shutdown.
const (
	DefaultHTTPAddr           = ":8080"
	DefaultAdminAddr          = "127.0.0.1:9090"
	DefaultLogLevel           = "info"
	DefaultLogFormat          = "json"
	DefaultHTTPMaxConnections = 4096
	DefaultShutdownTimeout    = 10 * time.Second
)

// Secrecy says whether, and how, a setting's value holds a secret.
type Secrecy int

// The Secrecy values.
const (
	// Public: the value is shown and logged as it is.
	Public Secrecy = iota
	// Whole: the value is a secret, and so is each comma-separated part
	// of it (a token list).
	Whole
	// Password: a URL whose password (or lone user part) is the secret.
	Password
	// Groups: VK_GROUPS, whose tokens, secrets and confirmation strings
	// are secrets.
	Groups
)

// A Setting is one row of the table: an environment variable and its
// flag (FlagName), its default as the help writes it ("" = empty), the
// limits its value is checked against (from the owning package's
// constants), and whether it holds a secret.
type Setting struct {
	Env     string
	Default string
	// Limits are the values allowed, as the help writes them ("1 to
	// 25", "at least 100ms"); "" when the type says it all.
	Limits string
	Secret Secrecy
	Help   string

	bind  func(fs *flag.FlagSet, name, help string)
	check func(env string) error // the value within Limits; nil when none
}

// Settings is the table, bound to a Config of its own: what every command
// lists, documents and checks against.
func Settings() []Setting {
	var c Config
	return table(&c)
}

// Default is the default of the setting env, "" for an unknown one.
func Default(env string) string {
	for _, s := range Settings() {
		if s.Env == env {
			return s.Default
		}
	}
	return ""
}

// FlagName turns HTTP_ADDR into http-addr.
func FlagName(env string) string { return strings.ReplaceAll(strings.ToLower(env), "_", "-") }

// table is the settings bound to c's fields.
func table(c *Config) []Setting {
	row := func(env string, v Setting, help string) Setting {
		v.Env, v.Help = env, help
		return v
	}
	secret := func(s Secrecy, v Setting) Setting { v.Secret = s; return v }
	unset := func(v Setting) Setting { v.Default = ""; return v } // empty by default, not 0
	memory := memcap.Limits{MaxNames: memcap.DefaultMaxNames, MaxBytes: memcap.DefaultMaxBytes}
	return []Setting{
		row("HTTP_ADDR", text(&c.HTTPAddr, DefaultHTTPAddr), "address of the public HTTP server: the webhook, /counters/ and /healthz"),
		row("ADMIN_ADDR", text(&c.AdminAddr, DefaultAdminAddr), "address of the admin HTTP server: the status page (/), /metrics, /stats, /texts, /readyz and /healthz; keep it private"),
		row("CALLBACK_PATH", text(&c.CallbackPath, callback.DefaultPath), "path VK posts Callback API events to"),
		row("REDIS_URL", secret(Password, text(&c.RedisURL, "")), "redis:// or rediss:// URL; empty (and no REDIS_CLUSTER) starts an embedded in-memory Redis"),
		row("REDIS_CLUSTER", text(&c.RedisCluster, ""), "comma-separated Redis Cluster seed addresses (host:port), instead of REDIS_URL"),
		row("REQUIRE_REDIS", boolean(&c.RequireRedis), "refuse to start without REDIS_URL or REDIS_CLUSTER, instead of starting the embedded Redis (the Docker image sets true: a deployment must not count on its own)"),
		row("REDIS_TIMEOUT", duration(&c.RedisTimeout, redisconn.DefaultTimeout, positive), "longest wait for one Redis command; longer than a stall (a failover, a slow fork), so a late answer is still used"),
		row("KEY_PREFIX", text(&c.KeyPrefix, freq.DefaultPrefix), "prefix of every Redis key the service writes (to share a Redis with other apps)"),
		row("WINDOW", duration(&c.Window, freq.DefaultWindow, wholeSeconds(freq.MinWindow, 0)), "sliding window a message is counted in (Go duration)"),
		row("NORMALIZE", boolean(&c.Normalize), "treat messages differing only in case and white space as the same"),
		row("TOP_TEXTS", integer(&c.TopTexts, 0, within(0, toptexts.MaxN)), "keep in this process the N texts with the highest count this instance saw in the window (their counts as its replies carried them), for the status page and /stats; no Redis command; 0 = off"),
		row("VK_TOKEN", secret(Whole, text(&c.VKToken, "")), "community token(s), comma-separated; empty = dry-run (replies are logged, not sent)"),
		row("REQUIRE_VK_TOKEN", boolean(&c.RequireVKToken), "refuse to start without a token for every community (no dry-run), and keep /readyz failing until VK accepts each token with the messages right (the Docker image sets true)"),
		row("VK_GROUP_ID", unset(integer(&c.VKGroupID, 0, nil)), "community id; may be empty in dry-run, which then serves a demo community 1"),
		row("VK_SECRET", secret(Whole, text(&c.VKSecret, "")), "Callback API secret key of the community"),
		row("VK_CONFIRMATION", secret(Whole, text(&c.VKConfirmation, "")), "string the confirmation event must return; empty with a token: asked of VK at each confirmation event (the last code VK gave if it does not answer within 1s), which is valid only for a Callback server added through the API (setup); for one added by hand, the code its settings show"),
		row("VK_GROUPS", secret(Groups, text(&c.VKGroups, "")), `several communities as JSON: [{"group_id":1,"secret":"…","confirmation":"…","token":"t1,t2"},…] (replaces the four VK_* above)`),
		row("VK_API_URL", text(&c.VKAPIURL, vkapi.DefaultMethodURL), "VK API base URL (point at a fake API for tests and load tests; in longpoll mode groups.getLongPollServer is asked there too)"),
		row("VK_MODE", text(&c.VKMode, ModeCallback), "how events arrive: callback (VK posts them to CALLBACK_PATH) or longpoll (the service asks VK's Bots Long Poll API; no public URL needed, every community needs a token)"),
		row("REPLY_QUOTE", text(&c.ReplyQuote, bot.QuoteChats.String()), "which replies quote the message they answer: chats (group chats, with messages.send's forward), all (private dialogs too, with reply_to where the message id is known) or off"),
		row("LONGPOLL_WAIT", duration(&c.LongPollWait, longpoll.DefaultWait, wholeSeconds(longpoll.MinWait, longpoll.MaxWait)), "how long one Bots Long Poll request waits for events"),
		row("VK_TIMEOUT", duration(&c.VKTimeout, vkapi.DefaultTimeout, positive), "timeout of one VK API call"),
		row("VK_RATE", float(&c.VKRate, bot.DefaultRatePerToken), "VK API calls per second per token, in total over every instance sending with it (paced in Redis, 5 % spare)"),
		row("VK_BATCH", integer(&c.VKBatch, bot.MaxBatch, within(1, bot.MaxBatch)), "most replies sent in one VK call (several go as one execute; 1 disables batching)"),
		row("OUTBOX_MAX_LEN", integer(&c.OutboxMaxLen, outbox.DefaultMaxLen, atLeast(1)), "replies that may wait per community in the outbox before the webhook answers 503"),
		row("OUTBOX_CLAIM_AFTER", duration(&c.ClaimAfter, outbox.DefaultClaimAfter, atLeast(outbox.MinClaimAfter)), "how long a reply may stay with a sender that stopped (a crashed instance) before another takes it over"),
		row("LOG_LEVEL", text(&c.LogLevel, DefaultLogLevel), "trace, debug, info, warn or error"),
		row("LOG_FORMAT", text(&c.LogFormat, DefaultLogFormat), "json or console"),
		row("MAX_BODY_BYTES", integer(&c.MaxBodyBytes, callback.DefaultMaxBodyBytes, atLeast[int64](1)), "largest webhook request body accepted"),
		row("WEBHOOK_TIMEOUT", duration(&c.WebhookTimeout, callback.DefaultTimeout, positive), "longest a webhook request waits for Redis before answering 503 with Retry-After (VK then re-delivers; the late result is recognised)"),
		row("HTTP_MAX_CONNECTIONS", integer(&c.HTTPMaxConnections, DefaultHTTPMaxConnections, atLeast(0)), "most connections each HTTP server (HTTP_ADDR, ADMIN_ADDR) serves at once; more are answered 503 with Retry-After and closed (lowered at start if the open-file limit leaves no room); 0 = unlimited"),
		row("SHUTDOWN_TIMEOUT", duration(&c.ShutdownTimeout, DefaultShutdownTimeout, positive), "how long SIGTERM waits for in-flight requests and queued replies"),
		row("COUNTER_ADDR", text(&c.CounterAddr, wire.DefaultAddr), "counter protocol TCP address (no authentication: keep it loopback or private); off disables the port"),
		row("COUNTER_MAX_CONNECTIONS", integer(&c.CounterMaxConnections, counters.DefaultMaxConnections, atLeast(0)), "most counter connections at once (lowered at start if the open-file limit leaves no headroom); 0 = unlimited"),
		row("COUNTER_BUCKETS", integer(&c.CounterBuckets, resource.DefaultBuckets, atLeast(1)), "size of the resource counter hash table"),
		row("COUNTER_STATS_INTERVAL", integer(&c.CounterStatsInterval, int(resource.DefaultInterval/time.Second), atLeast(int(resource.MinInterval/time.Second))), "seconds of the epoch-aligned interval for maximum consumption and GC"),
		row("RESOURCE_STORE", text(&c.ResourceStore, counters.StoreMemory), "where the resource counters (acquire/release) live: memory (this process; run one instance or use ring clients) or redis (the service's Redis: one maximum per name for every instance)"),
		row("RESOURCE_LEASE", duration(&c.ResourceLease, resource.DefaultLease, atLeast(resource.MinLease)), "with RESOURCE_STORE=redis: how long a dead instance's holdings outlive it; an instance that cannot renew its leases closes its holding connections first; a Redis that lost its data (or a new deployment) refuses acquires this long; the same on every instance"),
		row("RESOURCE_MAX_HOLDINGS", integer(&c.ResourceMaxHoldings, resource.DefaultMaxHoldings, atLeast(1)), "most counter names one connection of the counter port holds at once, in either resource store; an acquire of one more is refused (0x82)"),
		row("RESOURCE_MAX_MEMORY", integer(&c.ResourceMaxMemory, resource.DefaultMaxMemory, atLeast[int64](1)), "with RESOURCE_STORE=memory: estimated bytes the resource counters may take (names, counters, holdings); when full, counters released to 0 are deleted first, oldest first, then a new counter or holding is refused (0x82)"),
		row("COUNTERS_STORE", text(&c.CountersStore, counters.StoreRedis), "where access, participant, window and unique counters live: redis (the bot's Redis, embedded or real, shared by all instances), memory (this process) or file (BBS files under COUNTERS_DIR for access and participant counters; window and unique counters then in this process)"),
		row("COUNTERS_REDIS_URL", secret(Password, text(&c.CountersRedisURL, "")), "redis:// or rediss:// URL of a Redis for the counters alone (COUNTERS_STORE=redis and RESOURCE_STORE=redis); empty = the bot's Redis. Recommended where the counter port or /counters/ serve other apps: their counters then cannot fill the bot's Redis"),
		row("COUNTERS_REDIS_CLUSTER", text(&c.CountersRedisCluster, ""), "comma-separated Redis Cluster seed addresses for the counters alone, instead of COUNTERS_REDIS_URL"),
		row("COUNTERS_REDIS_HEADROOM", integer(&c.CountersRedisHeadroom, headroom.DefaultPercent, within(0, headroom.MaxPercent)), "percent of the counters' Redis maxmemory kept free (for the bot, when they share it): past maxmemory less this, the counter stores neither create names nor grow them (new participant keys, window seconds, unique registers; port: Out of memory, HTTP 507; existing data keeps counting where it does not grow); 0 disables; nothing is refused when Redis has no maxmemory"),
		row("COUNTERS_PARTICIPANT_MAX_KEYS", integer(&c.CountersMaxKeys, participant.DefaultMaxKeys, atLeast(1)), "most keys one participant counter name holds, in every store (the default: about 44 MB of Redis, 37 MB in memory, with 255-byte keys); a visit that would pass it is refused (port 0x82, HTTP 507) and changes nothing"),
		row("COUNTERS_DIR", text(&c.CountersDir, ""), "directory of the file store: count/ holds the access counters (count0.dat…), bbs.cnt the participants; only with COUNTERS_STORE=file"),
		row("COUNTERS_FILE_LEVELS", integer(&c.CountersFileLevels, access.DefaultLevels, within(1, access.MaxLevels)), "count files per access counter in the file store (the BBS's COUNTLEVEL)"),
		row("COUNTERS_HTTP_TOKEN", secret(Whole, text(&c.CountersHTTPToken, "")), "when set, the /counters/ HTTP API requires Authorization: Bearer <token>; when empty, it answers loopback clients only"),
		row("COUNTERS_TIMEOUT", duration(&c.CountersTimeout, counters.DefaultStoreTimeout, positive), "time limit of one access, participant, window or unique store call (counter port, HTTP API, bot)"),
		row("COUNTERS_MEMORY_MAX_NAMES", integer(&c.CountersMemoryMaxNames, memory.MaxNames, atLeast(1)), "most names each kind of counter kept in this process holds (access, participant, window, unique, each apart); a new name past it is refused (port 0x82, HTTP 507)"),
		row("COUNTERS_MEMORY_MAX_BYTES", integer(&c.CountersMemoryMaxBytes, memory.MaxBytes, atLeast[int64](1)), "estimated bytes each kind of counter kept in this process may take (each apart): new names are refused past 7/8 of it, new participant keys, window seconds and unique registers past all of it"),
	}
}

// Duration writes a duration as the settings table shows it: 24h, 30s,
// 1m30s (not 24h0m0s).
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// text is a string setting.
func text(p *string, def string) Setting {
	return Setting{Default: def, bind: func(fs *flag.FlagSet, n, h string) { fs.StringVar(p, n, "", h) }}
}

// boolean is a setting that is true or false, false by default.
func boolean(p *bool) Setting {
	return Setting{Default: "false", bind: func(fs *flag.FlagSet, n, h string) { fs.BoolVar(p, n, false, h) }}
}

// A limit is the range a number must be in.
type limit[T int | int64 | time.Duration] struct {
	lo, hi       T
	hasLo, hasHi bool
	whole        bool // a duration of whole seconds
}

// positive is the limit of a duration above zero.
var positive = atLeast[time.Duration](1)

func atLeast[T int | int64 | time.Duration](lo T) *limit[T] { return &limit[T]{lo: lo, hasLo: true} }

func within[T int | int64 | time.Duration](lo, hi T) *limit[T] {
	return &limit[T]{lo: lo, hi: hi, hasLo: true, hasHi: true}
}

// wholeSeconds is the limit of a duration in whole seconds from lo to hi
// (0: no upper limit).
func wholeSeconds(lo, hi time.Duration) *limit[time.Duration] {
	return &limit[time.Duration]{lo: lo, hi: hi, hasLo: true, hasHi: hi > 0, whole: true}
}

// String writes the limit as the help and the errors do.
func (l *limit[T]) String() string {
	show := func(v T) string {
		if d, ok := any(v).(time.Duration); ok {
			return Duration(d)
		}
		return fmt.Sprint(v)
	}
	var s string
	switch {
	case l.hasLo && l.lo == 1 && !l.hasHi:
		s = "positive"
	case l.hasHi:
		s = show(l.lo) + " to " + show(l.hi)
	default:
		s = "at least " + show(l.lo)
	}
	if l.whole {
		s = "whole seconds, " + s
	}
	return s
}

// check says whether v is within the limit.
func (l *limit[T]) check(env string, v T) error {
	whole := true
	if d, ok := any(v).(time.Duration); ok && l.whole {
		whole = d%time.Second == 0
	}
	if (l.hasLo && v < l.lo) || (l.hasHi && v > l.hi) || !whole {
		show := fmt.Sprint(v)
		if d, ok := any(v).(time.Duration); ok {
			show = Duration(d)
		}
		return fmt.Errorf("%s %s: must be %s", env, show, l)
	}
	return nil
}

// integer is a whole-number setting within lim (nil: any).
func integer[T int | int64](p *T, def T, lim *limit[T]) Setting {
	s := Setting{Default: fmt.Sprint(def), bind: func(fs *flag.FlagSet, n, h string) {
		switch p := any(p).(type) {
		case *int:
			fs.IntVar(p, n, 0, h)
		case *int64:
			fs.Int64Var(p, n, 0, h)
		}
	}}
	return limited(s, p, lim)
}

// duration is a duration setting within lim.
func duration(p *time.Duration, def time.Duration, lim *limit[time.Duration]) Setting {
	s := Setting{Default: Duration(def), bind: func(fs *flag.FlagSet, n, h string) { fs.DurationVar(p, n, 0, h) }}
	return limited(s, p, lim)
}

// float is a setting of a number above zero.
func float(p *float64, def int) Setting {
	return Setting{Default: strconv.Itoa(def), Limits: "positive",
		bind: func(fs *flag.FlagSet, n, h string) { fs.Float64Var(p, n, 0, h) },
		check: func(env string) error {
			if *p <= 0 {
				return fmt.Errorf("%s %v: must be positive", env, *p)
			}
			return nil
		}}
}

func limited[T int | int64 | time.Duration](s Setting, p *T, lim *limit[T]) Setting {
	if lim != nil {
		s.Limits = lim.String()
		s.check = func(env string) error { return lim.check(env, *p) }
	}
	return s
}
