package redisconn

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// A Scripter runs scripts one by one and in pipelines: *redis.Client,
// *redis.ClusterClient and *redis.Ring are.
type Scripter interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// RunEach runs n scripts in one pipeline (one round trip; on a cluster,
// one per node, sent at once), the i-th being the script, keys and
// arguments args(i) gives, and passes each reply (or its error) to reply.
// A script missing from the server's script cache did not run; it is run
// again with EVAL, which loads it. It returns the first error of the
// final replies (after those runs again; a nil reply, redis.Nil, is not
// an error) and how many replies failed.
func RunEach(ctx context.Context, rdb Scripter, n int,
	args func(i int) (*redis.Script, []string, []any), reply func(i int, cmd *redis.Cmd)) (failed int, err error) {
	cmds := make([]*redis.Cmd, n)
	rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			script, keys, a := args(i)
			cmds[i] = script.EvalSha(ctx, p, keys, a...)
		}
		return nil
	})
	for i, cmd := range cmds {
		if IsError(cmd.Err(), "NOSCRIPT") {
			// A SCRIPT FLUSH, or a failover to a server that never
			// saw the scripts.
			script, keys, a := args(i)
			cmd = script.Eval(ctx, rdb, keys, a...)
		}
		if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
			failed++
			if err == nil {
				err = e
			}
		}
		if reply != nil {
			reply(i, cmd)
		}
	}
	return failed, err
}
