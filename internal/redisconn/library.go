package redisconn

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A Library is Lua code shared by scripts, loaded into a Redis 7 server
// as a function library (FUNCTION LOAD) so that its functions are defined
// once: a script run with EVAL defines every function of its shared code
// again on each run, 9 % of the record script's instructions
// (BENCHMARKS.md, "Functions defined once, and the entry in one field").
// Its scripts (NewLibrary) run with FCALL where the server has functions,
// and with EVALSHA (EVAL) as any Script where it has not: Redis before 7,
// the embedded miniredis, a Redis Cluster (a library would have to be
// loaded on every master), a user whose ACL does not allow them.
//
// A library is named after what it is for and its source's SHA-1
// ("vkcounter_" + name + "_" + SHA-1), and so are its functions, so that
// instances of different builds sharing a server each call their own;
// Batcher.Load deletes the other versions of the same name.
type Library struct {
	name string
	stem string // name less its SHA-1: what every version of the library shares
	src  string // FUNCTION LOAD's argument
}

// A Function is one script of a Library: Main is its body, run after the
// library's shared code as a script's would be; Name names it in Redis
// after the library's name ("vkcounter_<name>_<SHA-1>_" + Name).
type Function struct {
	Name, Main string
}

// NewLibrary returns the scripts whose EVAL sources are shared followed by
// each function's Main, and gives them the library, called name, of shared
// and the functions. In the library, shared and each Main see KEYS and
// ARGV as they do in a script: the functions set them. name is letters,
// digits and underscores; it panics on another.
func NewLibrary(name, shared string, fns ...Function) []*Script {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
		panic(fmt.Sprintf("redisconn: library name %q is not letters, digits and underscores", name))
	}
	sum := sha1.New()
	sum.Write([]byte(shared))
	for _, f := range fns {
		fmt.Fprintf(sum, "\x00%s\x00%s", f.Name, f.Main)
	}
	l := &Library{stem: libraryPrefix + name + "_"}
	l.name = l.stem + hex.EncodeToString(sum.Sum(nil))
	var src strings.Builder
	fmt.Fprintf(&src, "#!lua name=%s\nlocal KEYS, ARGV\n%s\n", l.name, shared)
	scripts := make([]*Script, len(fns))
	for i, f := range fns {
		fn := l.name + "_" + f.Name
		fmt.Fprintf(&src, "redis.register_function('%s', function(keys, args)\nKEYS, ARGV = keys, args\n%s\nend)\n", fn, f.Main)
		scripts[i] = NewScript(shared + f.Main)
		scripts[i].lib, scripts[i].fn = l, any(fn)
	}
	// The probe Batcher.Load calls: it does nothing, and runs on a
	// replica or past maxmemory too.
	fmt.Fprintf(&src, "redis.register_function{function_name = '%s', callback = function() return 1 end, flags = {'no-writes'}}\n", l.probe())
	l.src = src.String()
	return scripts
}

// probe is the name of the library's function that does nothing.
func (l *Library) probe() string { return l.name + "_probe" }

// Name is the library's name in Redis (FUNCTION LIST).
func (l *Library) Name() string { return l.name }

// Library returns the library s is a function of, or nil for a script
// without one.
func (s *Script) Library() *Library { return s.lib }

// libraryPrefix begins the name of every library of the project.
const libraryPrefix = "vkcounter_"

// otherVersion reports whether name, a library's in Redis, is another
// version of l: l's name with another SHA-1, or a name of the form before
// libraries had names of their own ("vkcounter_" and a SHA-1 alone).
func (l *Library) otherVersion(name string) bool {
	if name == l.name {
		return false
	}
	sum, ok := strings.CutPrefix(name, l.stem)
	if !ok {
		sum, ok = strings.CutPrefix(name, libraryPrefix)
	}
	return ok && isSHA1(sum)
}

// isSHA1 reports whether s is a SHA-1 in lower-case hex, as names hold it.
func isSHA1(s string) bool {
	return len(s) == 2*sha1.Size && strings.Trim(s, "0123456789abcdef") == ""
}

// load sends FUNCTION LOAD of l. A library already loaded is not an
// error.
func (l *Library) load(ctx context.Context, p redis.Cmdable) *redis.StringCmd {
	return p.FunctionLoad(ctx, l.src)
}

// loaded returns err of l's FUNCTION LOAD, nil when it says the library was
// there already.
func loaded(err error) error {
	if msg, ok := errorReply(err); ok && strings.HasPrefix(msg, "ERR Library ") && strings.HasSuffix(msg, " already exists") {
		return nil
	}
	return err
}

// fcallRefused reports whether err, FCALL's answer, says the server will
// not run functions for this client, and so did not run this one: it does
// not know the command (Redis before 7, miniredis, a proxy that lists its
// commands) or the user may not run it. An error the function itself
// raised, after it may have written, is not such an answer.
func fcallRefused(err error) bool {
	msg, ok := errorReply(err)
	return ok && (strings.HasPrefix(msg, "ERR unknown command") || strings.HasPrefix(msg, "NOPERM ") && strings.Contains(msg, "'fcall'"))
}

// functionsRefused reports whether err, the answer to FUNCTION LOAD (less
// "already exists": see loaded) or to the library's probe, refuses
// functions for good: an ERR (an unknown command, a server whose Lua lacks
// something the library uses, a proxy's refusal in its own words) or a
// NOPERM. Errors that pass (OOM, READONLY, LOADING, BUSY, a connection's)
// do not.
func functionsRefused(err error) bool {
	msg, ok := errorReply(err)
	return ok && (strings.HasPrefix(msg, "ERR ") || strings.HasPrefix(msg, "NOPERM "))
}

// functionMissing reports whether err, FCALL's answer, says the server
// does not hold the function (a restart without persistence, FUNCTION
// FLUSH, a failover to a server that never had it): it did not run.
func functionMissing(err error) bool {
	return IsError(err, "ERR Function not found")
}
