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

	lib *Library // nil for a script of no library
	fn  any      // its function's name in lib, put in an interface once
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
	cmd := s.cmd(ctx, evalSHA, keys, args)
	_ = p.Process(ctx, cmd)
	if IsError(cmd.Err(), "NOSCRIPT") {
		cmd = s.cmd(ctx, evalSource, keys, args)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// How a command runs a script: by its hash, with its source, or as its
// library's function.
type runForm int

const (
	evalSHA runForm = iota
	evalSource
	fcall
)

// form returns how a pipeline runs s: as its library's function while
// functions are in use, else by its hash.
func (s *Script) form(functions bool) runForm {
	if functions && s.lib != nil {
		return fcall
	}
	return evalSHA
}

// cmd returns the command that runs the script with keys (by pointer) and
// args: EVALSHA, EVAL with the source, or FCALL of its function.
func (s *Script) cmd(ctx context.Context, form runForm, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 3+len(keys)+len(args))
	switch form {
	case evalSHA:
		cmdArgs[0], cmdArgs[1] = "evalsha", s.sha
	case evalSource:
		cmdArgs[0], cmdArgs[1] = "eval", s.src
	case fcall:
		cmdArgs[0], cmdArgs[1] = "fcall", s.fn
	}
	cmdArgs[2] = len(keys)
	for i := range keys {
		cmdArgs[3+i] = &keys[i]
	}
	copy(cmdArgs[3+len(keys):], args)
	return redis.NewCmd(ctx, cmdArgs...)
}
