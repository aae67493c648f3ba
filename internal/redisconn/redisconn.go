// Package redisconn opens the Redis clients of vkcounter, all with the
// settings that keep every call safe under the faults production brings:
//
//   - no transparent retries: go-redis re-sends a command that failed or
//     timed out on a new connection by default, and Redis runs both copies
//     once it answers again, so a retried write is a second write. Callers
//     retry where they can make the retry harmless;
//   - a read timeout (Config.Timeout) long enough to outlast a stall (a
//     slow fork, an AOF rewrite, a failover), so a command that Redis runs
//     late still gets its answer back;
//   - context deadlines honoured, so a caller with a tighter deadline than
//     Timeout gets its error in time.
//
// The cluster client counts MOVED/ASK redirections and retries of failed
// commands (a timeout, a connection closed before the answer) in one
// budget, MaxRedirects, so it follows no redirection either: while a slot
// moves (a resharding, a failover) a call fails with MOVED, which did not
// run the command; the client reloads the slot map, and the caller's own
// retry (VK's re-delivery, the sender's next round) reaches the new owner.
package redisconn

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is Config.Timeout when it is zero.
const DefaultTimeout = 30 * time.Second

// Config says which Redis to open: a URL, a list of cluster seed
// addresses, or a plain address (the embedded server).
type Config struct {
	// URL is a redis:// or rediss:// URL.
	URL string
	// Cluster lists Redis Cluster seed addresses, instead of URL.
	Cluster []string
	// Addr is a host:port, instead of URL and Cluster.
	Addr string
	// Timeout bounds one command's read and write (default DefaultTimeout).
	Timeout time.Duration
	// PoolSize is the connections kept per server (per node of a
	// cluster). Zero means go-redis's default, 10 per CPU; a pool_size in
	// URL wins over it.
	PoolSize int
}

// Open returns a client for cfg. It does not contact Redis.
func Open(cfg Config) (redis.UniversalClient, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case len(cfg.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cfg.Cluster,
			PoolSize:              cfg.PoolSize,
			MaxRetries:            -1,
			MaxRedirects:          -1,
			ReadTimeout:           timeout,
			WriteTimeout:          timeout,
			ContextTimeoutEnabled: true,
		}), nil
	case cfg.URL != "":
		opt, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		if opt.PoolSize == 0 {
			opt.PoolSize = cfg.PoolSize
		}
		Safe(opt, timeout)
		return redis.NewClient(opt), nil
	case cfg.Addr != "":
		opt := &redis.Options{Addr: cfg.Addr, PoolSize: cfg.PoolSize}
		Safe(opt, timeout)
		return redis.NewClient(opt), nil
	}
	return nil, errors.New("redisconn: no URL, cluster or address given")
}

// Safe sets opt to the settings described in the package comment: no
// retries, timeout for reads and writes, context deadlines honoured.
func Safe(opt *redis.Options, timeout time.Duration) {
	opt.MaxRetries = -1
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.ContextTimeoutEnabled = true
}

// IsError reports whether err is an error reply of Redis (or of a script's
// redis.error_reply) whose code, its first word such as NOGROUP or
// BUSYGROUP, is code. Redis error replies carry no other structure.
func IsError(err error, code string) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return msg == code || strings.HasPrefix(msg, code+" ")
}
