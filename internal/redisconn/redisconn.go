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
//
// A cluster's topology is followed as fast as it changes: a call refused
// with an error that may mean a node is down or a slot moved (a connection
// refused or broken, a timeout, MOVED, CLUSTERDOWN, ...) makes every
// client opened here for the same cluster reload its slot map at once, at
// most once per ReloadFloor, instead of at go-redis's periodic reload (a
// minute). The call itself is not repeated. Refusals counts such calls by
// cause (Causes), and CheckSlots names the slot ranges that cannot be
// reached.
package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
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

// Where names the Redis of c for messages, without its password: the
// cluster's seeds, or the server's address.
func (c Config) Where() string {
	if len(c.Cluster) > 0 {
		return "Redis Cluster " + strings.Join(c.Cluster, ",")
	}
	if c.URL == "" && c.Addr != "" {
		return "Redis at " + c.Addr
	}
	if opt, err := redis.ParseURL(c.URL); err == nil {
		return "Redis at " + opt.Addr
	}
	return "Redis"
}

// Open returns a client for cfg. It does not contact Redis.
func Open(cfg Config) (redis.UniversalClient, error) {
	c, err := open(cfg)
	if err != nil {
		return nil, err
	}
	follow(c)
	return c, nil
}

func open(cfg Config) (redis.UniversalClient, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case len(cfg.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:        ownAddrs(cfg.Cluster),
			PoolSize:     cfg.PoolSize,
			MaxRetries:   -1,
			MaxRedirects: -1,
			// One dial per call, not go-redis's five 100 ms apart: a node
			// that refuses connections is most often gone (a failover),
			// and the call's refusal makes the clients reload the slot map
			// at once. Dials send nothing, so this is no retry rule.
			DialerRetries:            1,
			ReadTimeout:              timeout,
			WriteTimeout:             timeout,
			ContextTimeoutEnabled:    true,
			DisableIdentity:          true,
			MaintNotificationsConfig: noMaintNotifications(),
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

// WithPool returns a new client with the options of c, a client Open
// returned, and a pool of its own of poolSize connections per server; it
// follows the cluster's topology with the other clients of the cluster.
//
// c's Options() hold go-redis's normalised values, where "no retries" (-1)
// reads 0, which a new client would turn into its default (3 retries, 3
// redirections): WithPool sets -1 again.
func WithPool(c redis.UniversalClient, poolSize int) redis.UniversalClient {
	var out redis.UniversalClient
	if cc, ok := c.(*redis.ClusterClient); ok {
		o := *cc.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = poolSize, 0, poolSize
		o.MaxRetries, o.MaxRedirects = -1, -1
		o.Addrs = ownAddrs(o.Addrs)
		o.PushNotificationProcessor = nil // as below
		out = redis.NewClusterClient(&o)
	} else {
		o := *c.(*redis.Client).Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = poolSize, 0, poolSize
		o.MaxRetries = -1
		// The push processor NewClient made for c is c's own: a second
		// client registering its handlers on it fails.
		o.PushNotificationProcessor = nil
		out = redis.NewClient(&o)
	}
	follow(out)
	return out
}

// ownAddrs returns a copy of a cluster's seed addresses, its capacity its
// length: go-redis appends the nodes it discovers to the slice it was
// given, so two clients given one slice with room to spare would write
// into the same array.
func ownAddrs(addrs []string) []string { return slices.Clip(slices.Clone(addrs)) }

// Safe sets opt to the settings described in the package comment: no
// retries, timeout for reads and writes, context deadlines honoured; and
// no connection set-up command a server may refuse (see noMaintNotifications).
func Safe(opt *redis.Options, timeout time.Duration) {
	opt.MaxRetries = -1
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.ContextTimeoutEnabled = true
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = noMaintNotifications()
}

// noMaintNotifications turns off go-redis's maintenance notifications (a
// Redis Enterprise feature), and DisableIdentity its CLIENT SETINFO: both
// are commands go-redis sends on every new connection, which servers before
// Redis 7.2 (6.2, 7.0, Valkey 7.2's older builds) answer with ERR, and
// which a user without the CLIENT commands (a managed service's ACL) is
// refused. The service uses neither.
func noMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// IsError reports whether err is an error reply of Redis (or of a script's
// redis.error_reply) whose code, its first word such as NOGROUP or
// BUSYGROUP, is code. Redis error replies carry no other structure.
func IsError(err error, code string) bool {
	msg, ok := errorReply(err)
	return ok && (msg == code || strings.HasPrefix(msg, code+" "))
}

// errorReply returns the text of err when it is an error reply of Redis
// (maybe wrapped), and whether it is one.
func errorReply(err error) (string, bool) {
	if err == nil { // the usual case, without the allocation errors.As costs
		return "", false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return "", false
	}
	return rerr.Error(), true
}

// urlForm is the shape of a Redis URL, shown when one is malformed.
const urlForm = "redis://host:6379/0 (redis://:password@host:6379/0 with a password, rediss:// for TLS)"

// CheckURL tells what is wrong with a Redis URL (REDIS_URL), if anything,
// and the form expected; the error does not repeat the URL, which may hold
// a password.
func CheckURL(v string) error {
	if isHostPort(v) {
		return fmt.Errorf("%q is an address, not a URL: write redis://%s/0", v, v)
	}
	u, err := url.Parse(v)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // url.Error repeats the URL
		}
		return fmt.Errorf("not a URL (%v); want %s", err, urlForm)
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	case "":
		return fmt.Errorf("no scheme: want %s", urlForm)
	default:
		return fmt.Errorf("scheme %q: want %s", u.Scheme, urlForm)
	}
	if _, err := redis.ParseURL(v); err != nil {
		return fmt.Errorf("%v; want %s", strings.TrimPrefix(err.Error(), "redis: "), urlForm)
	}
	return nil
}

// CheckCluster tells what is wrong with a comma-separated list of Redis
// Cluster seed addresses (REDIS_CLUSTER), if anything.
func CheckCluster(v string) error {
	for _, seed := range strings.Split(v, ",") {
		switch {
		case strings.Contains(seed, "://"):
			return fmt.Errorf("%q: seeds are host:port addresses, not URLs: host1:6379,host2:6379", seed)
		case !isHostPort(seed):
			return fmt.Errorf("%q: want comma-separated host:port seed addresses, such as host1:6379,host2:6379", seed)
		}
	}
	return nil
}

// isHostPort reports whether v is a host:port with a port number.
func isHostPort(v string) bool {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" || strings.ContainsAny(host, "/@") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536
}
