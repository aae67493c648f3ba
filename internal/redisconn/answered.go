package redisconn

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// An answers is what the calls of every client of one server (or one
// cluster) last told of it: when one was last answered, and when one last
// failed for a cause of Causes. It lets a readiness check rest on the
// service's own traffic instead of a PING of its own (Answered).
type answers struct {
	ok, failed atomic.Int64 // Unix nanoseconds; 0: never
}

// answersBy holds the answers of each server or cluster, by its identity
// (see identity).
var answersBy sync.Map // string → *answers

// answersOf returns the answers of c's server or cluster, shared by every
// client of it that this package opened (WithPool's too).
func answersOf(c redis.UniversalClient) *answers {
	v, _ := answersBy.LoadOrStore(identity(c), &answers{})
	return v.(*answers)
}

// identity names c's server: a single server's address and database, or
// a cluster's sorted seed addresses.
func identity(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.ClusterClient:
		seeds := slices.Clone(c.Options().Addrs)
		slices.Sort(seeds)
		return "cluster " + strings.Join(seeds, ",")
	case *redis.Client:
		o := c.Options()
		return o.Network + " " + o.Addr
	}
	return ""
}

// note records the outcome of one call: answered (nil, redis.Nil, or an
// error reply that is no refusal, such as a script's own error) or failed
// (a refusal of Causes).
func (a *answers) note(err error) {
	if a == nil {
		return
	}
	now := time.Now().UnixNano()
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		a.ok.Store(now)
	case Cause(err) != "":
		a.failed.Store(now)
	default:
		var rerr redis.Error
		if errors.As(err, &rerr) {
			a.ok.Store(now)
		}
	}
}

// Answered reports whether a call of a client of c's server (any client
// Open or WithPool returned for it) was answered within d of now, and
// none has failed since: a readiness check may then rest on it rather than
// send a PING of its own. A server that stalls with its connections open
// is not seen until a call fails or d passes.
func Answered(c redis.UniversalClient, d time.Duration) bool {
	v, ok := answersBy.Load(identity(c))
	if !ok {
		return false
	}
	a := v.(*answers)
	last := a.ok.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < d && a.failed.Load() < last
}
