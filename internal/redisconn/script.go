package redisconn

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A Script is a Lua script run as redis.Script runs it (EVALSHA, and EVAL
// when Redis's script cache does not hold it), but with its KEYS handed to
// go-redis by pointer: go-redis writes a *string as the string, and routes
// it to its slot in a cluster, while a pointer put in an interface costs
// no allocation where each string put in one costs one. A script with
// seven keys run for every message saves seven allocations a message.
type Script struct {
	*redis.Script
	src string
	sha any // the hash, put in an interface once
}

// NewScript returns the Script of the Lua source src.
func NewScript(src string) *Script {
	s := redis.NewScript(src)
	return &Script{Script: s, src: src, sha: s.Hash()}
}

// processor is what sends any command: *redis.Client, *redis.ClusterClient
// and *redis.Ring have it.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Exec runs the script with keys and args, as Run does. keys must not
// change until it returns. A client without Process (a mock Scripter) is
// served by Run.
func (s *Script) Exec(ctx context.Context, c redis.Scripter, keys []string, args []any) *redis.Cmd {
	p, ok := c.(processor)
	if !ok {
		return s.Run(ctx, c, keys, args...)
	}
	cmd := s.cmd(ctx, false, keys, args)
	_ = p.Process(ctx, cmd)
	if IsError(cmd.Err(), "NOSCRIPT") {
		cmd = s.cmd(ctx, true, keys, args)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// cmd returns the command that runs the script with keys (by pointer) and
// args: EVALSHA, or EVAL with the source when eval.
func (s *Script) cmd(ctx context.Context, eval bool, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 3+len(keys)+len(args))
	cmdArgs[0], cmdArgs[1], cmdArgs[2] = "evalsha", s.sha, len(keys)
	if eval {
		cmdArgs[0], cmdArgs[1] = "eval", s.src
	}
	for i := range keys {
		cmdArgs[3+i] = &keys[i]
	}
	copy(cmdArgs[3+len(keys):], args)
	return redis.NewCmd(ctx, cmdArgs...)
}
