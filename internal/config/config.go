// Package config is the service's settings: one table (Settings) binding
// each environment variable to its flag, with its default and limits taken
// from the owning packages' constants and whether it holds a secret; the
// Config it fills; and the one way every command reads it (Parse, Bind),
// defaults, then the environment, then flags.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Config is everything `vkcounter serve` can be told. Each field is a flag
// whose default comes from an environment variable (see Settings).
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

// The VK_MODE values: how events arrive.
const (
	// ModeCallback has VK post events to the webhook.
	ModeCallback = "callback"
	// ModeLongPoll takes events from VK's Bots Long Poll API.
	ModeLongPoll = "longpoll"
)

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

// DemoGroupID is the community served in dry-run when none is configured,
// so that `go run ./cmd/vkcounter` works with nothing else.
const DemoGroupID = 1

// Demo reports whether no community is configured (no VK_GROUPS, no
// VK_GROUP_ID), so that Communities returns the demo community.
func (c *Config) Demo() bool { return c.VKGroups == "" && c.VKGroupID == 0 }

// Communities returns the communities to serve, from VK_GROUPS or from
// VK_GROUP_ID and its companions.
func (c *Config) Communities() ([]Community, error) {
	if c.VKGroups != "" {
		if c.VKGroupID != 0 || c.VKToken != "" || c.VKSecret != "" || c.VKConfirmation != "" {
			return nil, errors.New("VK_GROUPS: replaces VK_GROUP_ID, VK_TOKEN, VK_SECRET and VK_CONFIRMATION; do not set both")
		}
		return parseGroups(c.VKGroups)
	}
	g := Community{GroupID: c.VKGroupID, Secret: c.VKSecret, Confirmation: c.VKConfirmation, Token: c.VKToken}
	switch {
	case g.GroupID < 0:
		return nil, fmt.Errorf("VK_GROUP_ID %d: must be positive", g.GroupID)
	case g.GroupID == 0 && g.Token != "":
		return nil, errors.New("VK_GROUP_ID: required when VK_TOKEN is set")
	case c.Demo():
		g.GroupID = DemoGroupID
	}
	return []Community{g}, nil
}

// parseGroups reads VK_GROUPS: a non-empty JSON list of communities, each
// with a positive group_id listed once.
func parseGroups(v string) ([]Community, error) {
	dec := json.NewDecoder(strings.NewReader(v))
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

// Redis is the service's Redis as REDIS_URL or REDIS_CLUSTER (its seeds
// win over the URL) name it, for redisconn.Open; with neither, the caller
// gives the embedded server's address.
func (c *Config) Redis() redisconn.Config {
	return redisConfig(c.RedisURL, c.RedisCluster, c.RedisTimeout)
}

// CountersRedis is the counters' own Redis (COUNTERS_REDIS_URL or
// COUNTERS_REDIS_CLUSTER); see CountersOwnRedis.
func (c *Config) CountersRedis() redisconn.Config {
	return redisConfig(c.CountersRedisURL, c.CountersRedisCluster, c.RedisTimeout)
}

func redisConfig(url, cluster string, timeout time.Duration) redisconn.Config {
	rc := redisconn.Config{URL: url, Timeout: timeout}
	if cluster != "" {
		rc.Cluster = strings.Split(cluster, ",")
	}
	return rc
}

// CountersOwnRedis reports whether the counters have a Redis of their own
// (COUNTERS_REDIS_URL or COUNTERS_REDIS_CLUSTER).
func (c *Config) CountersOwnRedis() bool {
	return c.CountersRedisURL != "" || c.CountersRedisCluster != ""
}

// CountersInRedis reports whether a counter store is in Redis
// (COUNTERS_STORE=redis or RESOURCE_STORE=redis).
func (c *Config) CountersInRedis() bool {
	return c.CountersStore == counters.StoreRedis || c.ResourceStore == counters.StoreRedis
}
