package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Check checks what the table's limits do not: the values' forms (URLs,
// names of modes and stores) and the settings that go together, each bad
// one in an error of its own.
func (c *Config) Check() error {
	errs := c.checkRedis()
	return errors.Join(append(errs, c.checkService(), c.checkVK(), c.checkCounters(), c.checkCommunities())...)
}

// checkService checks the webhook's path and the logs' format.
func (c *Config) checkService() error {
	var errs []error
	if !strings.HasPrefix(c.CallbackPath, "/") {
		errs = append(errs, fmt.Errorf("CALLBACK_PATH %q: must start with /", c.CallbackPath))
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT %q: must be json or console", c.LogFormat))
	}
	return errors.Join(errs...)
}

// checkVK checks the settings of VK's side: the API, the mode, the
// replies.
func (c *Config) checkVK() error {
	var errs []error
	if u, err := url.Parse(c.VKAPIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.HasSuffix(u.Path, "/") {
		errs = append(errs, fmt.Errorf("VK_API_URL %q: must be an http(s) URL ending in /", c.VKAPIURL))
	}
	switch c.VKMode {
	case ModeCallback:
	case ModeLongPoll:
		errs = append(errs, c.checkLongPoll())
	default:
		errs = append(errs, fmt.Errorf("VK_MODE %q: must be callback or longpoll", c.VKMode))
	}
	if _, err := bot.ParseQuote(c.ReplyQuote); err != nil {
		errs = append(errs, fmt.Errorf("REPLY_QUOTE %q: must be chats, all or off", c.ReplyQuote))
	}
	return errors.Join(errs...)
}

// checkLongPoll checks that VK_MODE=longpoll has a token for every
// community.
func (c *Config) checkLongPoll() error {
	cs, err := c.Communities()
	if err != nil {
		return nil // said by checkCommunities
	}
	if c.Demo() {
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

// checkCommunities checks the communities, and with REQUIRE_VK_TOKEN
// that each has a token.
func (c *Config) checkCommunities() error {
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

// checkRedis checks REDIS_URL, REDIS_CLUSTER and REQUIRE_REDIS. A
// malformed value is a usage error naming the variable and the expected
// form; the URL itself is not repeated, as it may hold a password.
func (c *Config) checkRedis() []error {
	errs := checkRedisPair("REDIS_URL", c.RedisURL, "REDIS_CLUSTER", c.RedisCluster)
	if c.RequireRedis && c.RedisURL == "" && c.RedisCluster == "" {
		errs = append(errs, errors.New("REQUIRE_REDIS=true: REDIS_URL or REDIS_CLUSTER is required (the embedded Redis would keep the counts in this process alone, and lose them when it stops)"))
	}
	return errs
}

// checkRedisPair checks a pair of Redis settings, a URL and a cluster's
// seeds, named urlVar and clusterVar: at most one is set, and it is
// well-formed. The URL itself is not repeated, as it may hold a password.
func checkRedisPair(urlVar, url, clusterVar, cluster string) []error {
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

// checkCounters checks the counters' stores: their names, the file
// store's directory, the counters' own Redis.
func (c *Config) checkCounters() error {
	var errs []error
	switch c.ResourceStore {
	case counters.StoreMemory, counters.StoreRedis:
	default:
		errs = append(errs, fmt.Errorf("RESOURCE_STORE %q: must be memory or redis", c.ResourceStore))
	}
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
	errs = append(errs, checkRedisPair("COUNTERS_REDIS_URL", c.CountersRedisURL, "COUNTERS_REDIS_CLUSTER", c.CountersRedisCluster)...)
	if c.CountersOwnRedis() && !c.CountersInRedis() {
		errs = append(errs, errors.New("COUNTERS_REDIS_URL / COUNTERS_REDIS_CLUSTER: only used with COUNTERS_STORE=redis or RESOURCE_STORE=redis"))
	}
	return errors.Join(errs...)
}
