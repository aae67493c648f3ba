package redisconn

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching's defaults.
const (
	// DefaultMaxBatch is BatchOptions.MaxBatch when it is zero.
	DefaultMaxBatch = 128
	// DefaultFlights is BatchOptions.Flights when it is zero.
	DefaultFlights = 1
)

// BatchOptions configure a Batcher. Zero fields mean the documented
// defaults.
type BatchOptions struct {
	// MaxBatch is the most scripts sent in one pipeline. Zero means
	// DefaultMaxBatch.
	MaxBatch int
	// Flights is the most pipelines in flight at once: calls made while
	// that many are wait and go out together in the next. Zero means
	// DefaultFlights. A pipeline takes a connection of go-redis's pipeline
	// pool (PipelinePoolSize, 10 by default, per server or node), apart
	// from the pool of single commands: keep Flights below it.
	Flights int
	// Timeout bounds one pipeline (and the EVALs of the scripts Redis
	// did not hold). Zero means the client's read plus write timeout
	// (Config.Timeout twice for a client Open returned), or twice
	// DefaultTimeout for a client of another kind.
	Timeout time.Duration
}

// A Batcher runs scripts for many callers at once in pipelines, by group
// commit: a call made while no pipeline is in flight (fewer than Flights)
// goes out once the goroutines that were ready to run at that moment have
// had their turn, with the calls they made (the webhook requests one
// network poll woke, say), and with no other delay: alone when idle;
// calls made while the pipelines are in flight wait and go out together,
// up to MaxBatch in one, when one comes back. Under load Redis then reads
// and answers many scripts per system call, and the client makes one
// round trip for many: an empty script costs Redis about 16 µs of CPU
// sent alone and 4–6 µs in pipelines of 10 to 50 (BENCHMARKS.md), the
// rest being the event loop's and the socket's work per request. Idle, a
// call costs what Script.Exec costs.
//
// Every script is sent once: a pipeline that fails (a connection cut, a
// timeout) gives each of its calls the error, and no call is sent again
// (the client Open returned does not retry either), so a script's writes
// stay exactly once as they are with Exec; as with any call that gets no
// answer, the outcome of a failed one is unknown. A script that Redis's
// script cache did not hold (NOSCRIPT: it did not run) is sent again with
// EVAL, in a second pipeline. A script of a Library is sent as its
// function (FCALL) while the server runs functions; one the server did
// not hold (it did not run) is sent again with EVAL, in the second
// pipeline after its library's FUNCTION LOAD, and one the server refused
// as a command (it did not run either) with EVAL, as are the Library's
// scripts from then on. On a Redis Cluster, go-redis splits each
// pipeline by node and sends the parts at once.
//
// A pipeline runs on a context of its own, bounded by Timeout, not on a
// caller's: one caller giving up (its context ending) fails no other call
// of its batch. That caller's Run returns its context's error at once; its
// script is not sent if it was still waiting, and may run if it was sent.
//
// go-redis's own autopipelining is not used: it re-sends a command after
// its connection fails and re-runs some error replies.
//
// The zero Batcher is not usable: make one with NewBatcher. It is safe for
// concurrent use. It keeps no goroutine while idle: a pipeline's goroutine
// starts with a call and ends when no call waits, and each pipeline ends
// within Timeout, so a Batcher needs no Close.
type Batcher struct {
	rdb      Scripter
	maxBatch int
	flights  int
	timeout  time.Duration

	// functions is whether a script of a Library is run with FCALL: until
	// the server refuses functions (see Library), never on a cluster.
	functions atomic.Bool

	mu      sync.Mutex // guards waiting and flying
	waiting []*batchCall
	flying  int // goroutines sending pipelines

	sent func(n int) // tests only: called with each pipeline's size before it is sent
}

// A batchCall is one script run waiting for, or in, a pipeline.
type batchCall struct {
	ctx    context.Context // the caller's: a call whose caller gave up is not sent
	script *Script
	keys   []string
	args   []any
	cmd    *redis.Cmd    // the reply, set before done is closed
	done   chan struct{} // closed once cmd is set
}

// NewBatcher returns a Batcher that sends its pipelines with rdb (a
// client Open or WithPool returned).
func NewBatcher(rdb Scripter, opts BatchOptions) *Batcher {
	b := &Batcher{rdb: rdb, maxBatch: opts.MaxBatch, flights: opts.Flights, timeout: opts.Timeout}
	if b.maxBatch <= 0 {
		b.maxBatch = DefaultMaxBatch
	}
	if b.flights <= 0 {
		b.flights = DefaultFlights
	}
	if b.timeout <= 0 {
		b.timeout = commandTimeout(rdb)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	b.functions.Store(!cluster)
	return b
}

// Load loads libs into the server (FUNCTION LOAD), in one pipeline, and
// calls a function of each that does nothing, so that the first calls of
// their scripts need not load them, or learns that the server will not run
// functions for this client: a refusal of either (an ERR or NOPERM, in
// whatever words: a proxy may take FUNCTION LOAD and refuse FCALL in its
// own) turns them off, and their scripts run with EVALSHA. An error reply
// that passes (OOM: FUNCTION LOAD is a write, READONLY, LOADING) leaves
// the load to the first call that finds the library missing.
//
// Load then deletes the other versions of libs in the server (another
// build's: see Library; and the libraries named by their SHA-1 alone, as
// builds before names did), so that a server does not keep a library for
// every build that ever ran on it. An instance of such a build that still
// runs (a rolling deploy) loads its own again at its next call, which
// runs once. A refusal to list or delete them (an ACL) leaves them. Load
// returns only an error of the connection.
func (b *Batcher) Load(ctx context.Context, libs ...*Library) error {
	if !b.functions.Load() {
		return nil
	}
	loads := make([]*redis.StringCmd, len(libs))
	probes := make([]*redis.Cmd, len(libs))
	var list *redis.FunctionListCmd
	b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, lib := range libs {
			loads[i] = lib.load(ctx, p)
			probes[i] = p.FCall(ctx, lib.probe(), nil)
		}
		list = p.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: libraryPrefix + "*"})
		return nil
	})
	for i := range libs {
		// The probe's answer is read only when the library was loaded.
		for _, err := range []error{loaded(loads[i].Err()), probes[i].Err()} {
			_, reply := errorReply(err)
			if functionsRefused(err) {
				b.functions.Store(false)
				return nil
			}
			if reply { // it passes: the first call that finds the library missing loads it
				break
			}
			if err != nil {
				return err
			}
		}
	}
	return b.deleteOtherVersions(ctx, libs, list)
}

// deleteOtherVersions deletes the libraries list found that are other
// versions of one of libs. Error replies leave them; it returns only an
// error of the connection.
func (b *Batcher) deleteOtherVersions(ctx context.Context, libs []*Library, list *redis.FunctionListCmd) error {
	found, err := list.Result()
	if err != nil {
		if _, reply := errorReply(err); reply {
			return nil
		}
		return err
	}
	var others []string
	for _, info := range found {
		if slices.ContainsFunc(libs, func(l *Library) bool { return l.otherVersion(info.Name) }) {
			others = append(others, info.Name)
		}
	}
	if len(others) == 0 {
		return nil
	}
	cmds, _ := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range others {
			p.FunctionDelete(ctx, name) // "Library not found": another instance deleted it first
		}
		return nil
	})
	for _, c := range cmds {
		if _, reply := errorReply(c.Err()); c.Err() != nil && !reply {
			return c.Err()
		}
	}
	return nil
}

// Functions reports whether b runs the scripts of a Library as functions
// (FCALL): false once the server refused them, and on a cluster.
func (b *Batcher) Functions() bool { return b.functions.Load() }

// commandTimeout is the longest one command may take on rdb: its write
// and read timeouts.
func commandTimeout(rdb Scripter) time.Duration {
	var r, w time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		r, w = c.Options().ReadTimeout, c.Options().WriteTimeout
	case *redis.ClusterClient:
		r, w = c.Options().ReadTimeout, c.Options().WriteTimeout
	}
	if r <= 0 || w <= 0 {
		return 2 * DefaultTimeout
	}
	return r + w
}

// Run runs script with keys and args in the next pipeline and returns its
// reply, or a reply whose error is ctx's when ctx ends first. keys and
// args, and whatever args point to, are the Batcher's from then on: they
// may be read after Run returned (a call sent as its caller gave up), so
// the caller must not change them.
func (b *Batcher) Run(ctx context.Context, script *Script, keys []string, args []any) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		return failedCmd(ctx, err)
	}
	c := &batchCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, c)
	start := b.flying < b.flights
	if start {
		b.flying++
	}
	b.mu.Unlock()
	if start {
		go b.send()
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		return failedCmd(ctx, ctx.Err())
	}
}

// failedCmd returns a reply whose error is err.
func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// send sends pipelines of the waiting calls until none waits.
func (b *Batcher) send() {
	// The goroutine that started this one is parked on its call, and this
	// one would run next, ahead of the goroutines already ready to run:
	// it yields to them first, so that their calls join this pipeline
	// instead of waiting for its round trip. Under 50 webhook clients
	// Redis's reads a message fell from 0.52 to 0.14 where Redis answered
	// at once, from 0.17 to 0.13 where it shared a busy core (BENCHMARKS.md).
	runtime.Gosched()
	batch := make([]*batchCall, 0, b.maxBatch)
	for {
		batch = batch[:0]
		b.mu.Lock()
		n := min(len(b.waiting), b.maxBatch)
		for _, c := range b.waiting[:n] {
			if err := c.ctx.Err(); err != nil {
				// Its caller gave up, and has its error: not sent, its
				// outcome is known (nothing done).
				c.cmd = failedCmd(c.ctx, err)
				close(c.done)
				continue
			}
			batch = append(batch, c)
		}
		rest := copy(b.waiting, b.waiting[n:])
		clear(b.waiting[rest:])
		b.waiting = b.waiting[:rest]
		if len(batch) == 0 && rest == 0 {
			b.flying--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if len(batch) > 0 {
			b.pipeline(batch)
		}
	}
}

// pipeline sends batch's scripts in one pipeline, those Redis did not
// hold (or whose library it did not, or whose functions it refused) again
// with EVAL in a second, with the missing libraries' FUNCTION LOAD, and
// hands each call its reply.
func (b *Batcher) pipeline(batch []*batchCall) {
	if b.sent != nil {
		b.sent(len(batch))
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	functions := b.functions.Load()
	b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = c.script.cmd(ctx, c.script.form(functions), c.keys, c.args)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	var again []int        // the calls that did not run: NOSCRIPT, no such function
	var missing []*Library // the libraries the server did not hold
	for i, cmd := range cmds {
		err, s := cmd.Err(), batch[i].script
		if err == nil { // it ran: the usual case, read no further
			continue
		}
		fcalled := s.form(functions) == fcall
		switch {
		case IsError(err, "NOSCRIPT"):
			// A SCRIPT FLUSH, or a failover to a server that never saw
			// the script: it did not run.
		case fcalled && functionMissing(err):
			if !slices.Contains(missing, s.lib) {
				missing = append(missing, s.lib)
			}
		case fcalled && fcallRefused(err):
			b.functions.Store(false)
		default:
			continue
		}
		again = append(again, i)
	}
	if len(again) > 0 {
		loads := make([]*redis.StringCmd, len(missing))
		b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, lib := range missing {
				loads[i] = lib.load(ctx, p)
			}
			for _, i := range again {
				c := batch[i]
				cmds[i] = c.script.cmd(ctx, evalSource, c.keys, c.args)
				_ = p.Process(ctx, cmds[i])
			}
			return nil
		})
		for _, l := range loads {
			if functionsRefused(loaded(l.Err())) {
				b.functions.Store(false)
			}
		}
	}
	for i, c := range batch {
		c.cmd = cmds[i]
		close(c.done)
	}
}
