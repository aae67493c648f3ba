package redisconn

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// ReloadFloor is the least time between two reloads of a cluster's slot
// map that errors ask for: at most a few reloads a second, however many
// calls fail.
const ReloadFloor = 250 * time.Millisecond

// Causes are the causes of a refused call, the values Refusals counts:
//
//   - conn: the server could not be reached, or the connection broke
//     (refused, reset, closed before the answer);
//   - timeout: no answer in time (the read timeout or the caller's
//     deadline), or no connection free in the pool in time;
//   - moved: the slot is served by another node (MOVED, ASK);
//   - clusterdown, tryagain, readonly, masterdown, loading: the cluster
//     or the node cannot serve the slot now (CLUSTERDOWN, TRYAGAIN while
//     a slot moves, READONLY from a replica, MASTERDOWN, LOADING);
//   - oom: the server is full (CauseOOM: Redis's OOM past maxmemory, or
//     a managed service's wording of it);
//   - quota: the plan's request quota is spent (CauseQuota);
//   - busy: a script runs too long (BUSY).
//
// Every cause but oom, quota and busy may mean the cluster's topology
// changed, and reloads the slot map of a cluster client (see Open).
var Causes = []string{"conn", "timeout", "moved", "clusterdown", "tryagain", "readonly", "masterdown", "loading", "oom", "quota", "busy"}

// refusals counts the refused calls of every client this package opened,
// by cause (indexes of Causes).
var refusals [11]atomic.Uint64

// Refusals returns how many calls of the clients this package opened
// Redis refused or could not be reached for, since the process started,
// by cause (one of Causes).
func Refusals(cause string) uint64 {
	if i := slices.Index(Causes, cause); i >= 0 {
		return refusals[i].Load()
	}
	return 0
}

// scriptPrefix starts the reply Redis 6.2 gives for an error a script's
// redis.call raised: "ERR Error running script (call to f_…):
// @user_script:1: @user_script: 1: -OOM command not allowed…". Redis 7.0
// and later pass the inner reply through as it is.
const scriptPrefix = "ERR Error running script"

// A replyText is an error reply read out of a wrapping one.
type replyText string

func (e replyText) Error() string { return string(e) }

// RedisError marks replyText as a Redis error reply (redis.Error).
func (replyText) RedisError() {}

// scriptInner returns the error reply msg wraps, if msg is Redis 6.2's
// wrapping of an error a script's call raised.
func scriptInner(msg string) (redis.Error, bool) {
	if !strings.HasPrefix(msg, scriptPrefix) {
		return nil, false
	}
	i := strings.LastIndex(msg, ": -")
	if i < 0 {
		return nil, false
	}
	return replyText(msg[i+3:]), true
}

// Cause returns the cause (one of Causes) of err, the failure of a call,
// or "" when err is no refusal: nil, redis.Nil, the caller's
// cancellation, a closed client, or an error reply of a command or script
// (a wrong argument, a script's own error).
func Cause(err error) string {
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed):
		return ""
	}
	var rerr redis.Error
	if errors.As(err, &rerr) { // an error reply, maybe wrapped: its own text is read
		if inner, ok := scriptInner(rerr.Error()); ok {
			rerr = inner
		}
		switch {
		case redis.IsClusterDownError(rerr):
			return "clusterdown"
		case redis.IsTryAgainError(rerr):
			return "tryagain"
		case redis.IsReadOnlyError(rerr):
			return "readonly"
		case redis.IsMasterDownError(rerr):
			return "masterdown"
		case redis.IsLoadingError(rerr):
			return "loading"
		case redis.IsOOMError(rerr):
			return CauseOOM
		case IsError(rerr, "BUSY"):
			return "busy"
		}
		if cause := managedCause(rerr.Error()); cause != "" {
			return cause
		}
		if _, moved := redis.IsMovedError(rerr); moved {
			return "moved"
		}
		if _, ask := redis.IsAskError(rerr); ask {
			return "moved"
		}
		return ""
	}
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case nerr != nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "conn"
	}
	return ""
}

// reloads reports whether a refusal of cause may mean that the cluster's
// topology changed.
func reloads(cause string) bool {
	return cause != "" && cause != CauseOOM && cause != CauseQuota && cause != "busy"
}

// A follower counts the refused calls of a client and, for a cluster,
// reloads the slot map of every client of the same cluster (the same seed
// addresses) when one of them meets a refusal that may mean the topology
// changed: a node down, a slot moved, a failover under way. It reloads at
// most once per ReloadFloor; go-redis's reload (ClusterClient.ReloadState)
// reads the slot map in the background and resends nothing, and the call
// that failed is not repeated (see the package comment).
//
// The nodes learn of a failover by gossip, a few at a time: a reload may
// read a slot map a moment old, and a client that then makes no call would
// keep it. So the last reload of a burst is followed by one more, a
// SettleAfter later.
type follower struct {
	mu       sync.Mutex
	clients  []weak.Pointer[redis.ClusterClient] // closed ones are dropped with their last reference
	last     time.Time                           // the last reload asked for
	trailing *time.Timer                         // the reload after the last, once armed
}

// SettleAfter is how long after the last reload of a burst the slot maps
// are reloaded once more.
const SettleAfter = time.Second

// followers holds the follower of each cluster, by its sorted seed list.
var followers sync.Map // string → *follower

// follow adds c to the follower of its cluster, and a hook to c that
// counts c's refused calls and asks that follower to reload. A single
// server's client (c a *redis.Client) only counts.
func follow(c redis.UniversalClient) {
	var f *follower
	if cc, ok := c.(*redis.ClusterClient); ok {
		seeds := slices.Clone(cc.Options().Addrs)
		slices.Sort(seeds)
		v, _ := followers.LoadOrStore(strings.Join(seeds, ","), &follower{})
		f = v.(*follower)
		f.mu.Lock()
		f.clients = append(f.clients, weak.Make(cc))
		f.mu.Unlock()
	}
	c.AddHook(hook{f, answersOf(c)})
}

// refused counts a call refused with err and, for a cause that may mean
// a topology change, reloads the cluster's slot maps (f nil: none).
func (f *follower) refused(ctx context.Context, err error) {
	cause := Cause(err)
	if cause == "" {
		return
	}
	if ctx.Value(uncounted{}) == nil {
		refusals[slices.Index(Causes, cause)].Add(1)
	}
	if f != nil && reloads(cause) {
		f.reload()
	}
}

// reload asks every live client of the cluster to reload its slot map,
// unless the last reload was asked for less than ReloadFloor ago, and
// again SettleAfter later unless another reload comes first.
func (f *follower) reload() {
	f.mu.Lock()
	now := time.Now()
	if !f.last.IsZero() && now.Sub(f.last) < ReloadFloor {
		f.mu.Unlock()
		return
	}
	f.last = now
	if f.trailing == nil {
		f.trailing = time.AfterFunc(SettleAfter, f.settle)
	} else {
		f.trailing.Reset(SettleAfter)
	}
	f.reloadAll()
}

// settle is the reload after the last of a burst.
func (f *follower) settle() {
	f.mu.Lock()
	f.reloadAll()
}

// reloadAll asks every live client to reload its slot map; f.mu is held,
// and released.
func (f *follower) reloadAll() {
	live := make([]*redis.ClusterClient, 0, len(f.clients))
	kept := f.clients[:0]
	for _, w := range f.clients {
		if c := w.Value(); c != nil {
			live = append(live, c)
			kept = append(kept, w)
		}
	}
	clear(f.clients[len(kept):])
	f.clients = kept
	f.mu.Unlock()
	for _, c := range live {
		c.ReloadState(context.Background()) // in the background; a closed client reloads nothing
	}
}

// Refused is for a call made on a connection of the caller's own to a
// node of c (a *redis.Client made from the node's options, as a read that
// waits uses): it counts the refusal err, if it is one, and reloads c's
// cluster's slot maps as a refused call of c would, and tells Answered of
// it. ctx is the call's.
func Refused(ctx context.Context, c redis.UniversalClient, err error) {
	var f *follower
	if cc, ok := c.(*redis.ClusterClient); ok {
		seeds := slices.Clone(cc.Options().Addrs)
		slices.Sort(seeds)
		if v, ok := followers.Load(strings.Join(seeds, ",")); ok {
			f = v.(*follower)
		}
	}
	f.refused(ctx, err)
	answersOf(c).note(err)
}

// uncounted is the context key of a call whose refusal is not counted
// (the readiness probe's).
type uncounted struct{}

// hook is the go-redis hook of a follower, and of the answers of the
// client's server.
type hook struct {
	f *follower
	a *answers
}

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			h.f.refused(ctx, err)
		}
		h.a.note(err)
		return err
	}
}

func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cerr := cmd.Err(); cerr != nil {
				h.f.refused(ctx, cerr)
			}
			h.a.note(cmd.Err())
		}
		return err
	}
}
