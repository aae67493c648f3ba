package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
)

const cntUsage = `Usage: vkcounter cnt [-addr HOST:PORT[,HOST:PORT...] | -dns HOST:PORT] [-timeout D] [-hold] COMMAND [ARGS] [COMMAND [ARGS]]...

Talks to counter ports like yc-cnt. Commands run in order, on one connection
per server. With several servers (-addr A,B,C, or every address -dns
resolves to), each named command goes to the server owning the name on the
consistent-hashing ring (client.Ring: ketama, 100 points per server), and
noop, stats and dump go to every server, each output line prefixed with its
server's address. Commands:
  noop
  get NAME
  acquire NAME RESOURCES MAXIMUM
  release NAME RESOURCES
  stats
  dump
Access and participant counters (vkcounter's extension opcodes):
  hit NAME                  prints the new total
  add NAME N                adds N (at least 1) and prints the new total
  total NAME                prints the total
  list PREFIX               prints "total name" for every access counter whose name
                            starts with PREFIX ("" for all), in byte order, on every server
  visit NAME KEY TIMEOUT    prints the active count and 1 if KEY is new, else 0
  leave NAME KEY            prints the active count and 1 if KEY was removed, else 0
  active NAME TIMEOUT       prints the active count
TIMEOUT is in seconds; 0 means the server's default (300).
Window and unique counters:
  whit NAME WINDOW          hits NAME's WINDOW-second counter; prints the hits before it
  wcount NAME WINDOW        prints the hits inside the last WINDOW seconds
  uadd NAME KEY             adds KEY; prints 1 if the estimate may have changed, else 0
  ucount NAME[,NAME...]     prints the estimated distinct keys of the names' union
WINDOW is in seconds, 1 to 604800 (7 days).

Resources acquired are released when the connection closes; with -hold the
connection stays open, holding them, until the command is interrupted (exit
0) or the connection is lost (an error, exit 1: the resources are no longer
held). An error answer prints "ERROR: <status hex> <message>" on stderr and
exits 1, as does a connection failure; a usage error exits 2.

Example: vkcounter cnt -addr 127.0.0.1:11215 acquire jobs 1 10 get jobs

Flags:
`

// A cntOp is one command of `vkcounter cnt`, all of it in one entry of
// cntOps: its arguments, and parse, which reads and checks them (with the
// client's own checks, so that a bad command anywhere in the list runs
// none of them) and returns the call that runs it.
type cntOp struct {
	args    string // e.g. "NAME RESOURCES MAXIMUM"; as many arguments as words
	example string // arguments of an example, for errors; "" for none
	parse   func(a []string) (cntCall, error)
}

// A cntCall runs a parsed command and prints its answer.
type cntCall func(ctx context.Context, r *cntRun) error

// cntOps are the commands.
var cntOps = map[string]cntOp{
	"noop": {"", "", func([]string) (cntCall, error) {
		return each(func(ctx context.Context, c *client.Client, println func(...any)) error {
			err := c.Noop(ctx)
			if err == nil {
				println("OK")
			}
			return err
		}), nil
	}},
	"stats": {"", "", func([]string) (cntCall, error) {
		return each(func(ctx context.Context, c *client.Client, println func(...any)) error {
			stats, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			for _, s := range stats {
				println(s.Name, s.Value)
			}
			return nil
		}), nil
	}},
	"dump": {"", "", func([]string) (cntCall, error) {
		return each(func(ctx context.Context, c *client.Client, println func(...any)) error {
			return c.Dump(ctx, func(e wire.DumpEntry) error {
				println(e.Consumption, e.MaxConsumption, e.Name)
				return nil
			})
		}), nil
	}},
	"get": {"NAME", "", func(a []string) (cntCall, error) {
		return one(func(ctx context.Context, c *client.RingClient) (uint32, error) { return c.Get(ctx, a[0]) }), wire.CheckName(a[0])
	}},
	"acquire": {"NAME RESOURCES MAXIMUM", "jobs 1 10", func(a []string) (cntCall, error) {
		res, err := parseUint32("RESOURCES", a[1])
		if err != nil {
			return nil, err
		}
		maximum, err := parseUint32("MAXIMUM", a[2])
		if err != nil {
			return nil, err
		}
		return one(func(ctx context.Context, c *client.RingClient) (uint32, error) {
				return c.Acquire(ctx, a[0], res, maximum)
			}),
			client.CheckAcquire(a[0], res, maximum)
	}},
	"release": {"NAME RESOURCES", "jobs 1", func(a []string) (cntCall, error) {
		res, err := parseUint32("RESOURCES", a[1])
		return one(func(ctx context.Context, c *client.RingClient) (string, error) {
				return "OK", c.Release(ctx, a[0], res)
			}),
			cmp.Or(err, wire.CheckName(a[0]))
	}},
	"hit": {"NAME", "", func(a []string) (cntCall, error) {
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.Hit(ctx, a[0]) }), wire.CheckKindName(a[0])
	}},
	"add": {"NAME N", "pages 5", func(a []string) (cntCall, error) {
		delta, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil || delta < 1 {
			return nil, fmt.Errorf("N %q: want a whole number from 1 to %d, such as 5", a[1], int64(wire.MaxDelta))
		}
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.Add(ctx, a[0], delta) }), wire.CheckKindName(a[0])
	}},
	"total": {"NAME", "", func(a []string) (cntCall, error) {
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.Total(ctx, a[0]) }), wire.CheckKindName(a[0])
	}},
	"list": {"PREFIX", "page_", func(a []string) (cntCall, error) {
		return each(func(ctx context.Context, c *client.Client, println func(...any)) error {
			for after := ""; ; {
				entries, more, err := c.List(ctx, a[0], after, wire.MaxListLimit)
				if err != nil {
					return err
				}
				for _, e := range entries {
					println(e.Total, e.Name)
					after = e.Name
				}
				if !more || len(entries) == 0 {
					return nil
				}
			}
		}), client.CheckList(a[0], "", wire.MaxListLimit)
	}},
	"visit": {"NAME KEY TIMEOUT", "room alice 300", func(a []string) (cntCall, error) {
		timeout, err := parseTimeout(a[2])
		if err != nil {
			return nil, err
		}
		return one(func(ctx context.Context, c *client.RingClient) (string, error) {
			n, isNew, err := c.Visit(ctx, a[0], a[1], timeout)
			return fmt.Sprint(n, " ", flag01(isNew)), err
		}), cmp.Or(client.CheckTimeout(timeout), wire.CheckKey(a[1]), wire.CheckKindName(a[0]))
	}},
	"leave": {"NAME KEY", "", func(a []string) (cntCall, error) {
		return one(func(ctx context.Context, c *client.RingClient) (string, error) {
			n, removed, err := c.Leave(ctx, a[0], a[1])
			return fmt.Sprint(n, " ", flag01(removed)), err
		}), cmp.Or(wire.CheckKey(a[1]), wire.CheckKindName(a[0]))
	}},
	"active": {"NAME TIMEOUT", "room 300", func(a []string) (cntCall, error) {
		timeout, err := parseTimeout(a[1])
		if err != nil {
			return nil, err
		}
		return one(func(ctx context.Context, c *client.RingClient) (int, error) { return c.Active(ctx, a[0], timeout) }),
			cmp.Or(client.CheckTimeout(timeout), wire.CheckKindName(a[0]))
	}},
	"whit": {"NAME WINDOW", "api:42 3600", func(a []string) (cntCall, error) {
		w, err := parseWindow(a[1])
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.WindowHit(ctx, a[0], w) }),
			cmp.Or(err, client.CheckWindow(a[0], w))
	}},
	"wcount": {"NAME WINDOW", "api:42 3600", func(a []string) (cntCall, error) {
		w, err := parseWindow(a[1])
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.WindowCount(ctx, a[0], w) }),
			cmp.Or(err, client.CheckWindow(a[0], w))
	}},
	"uadd": {"NAME KEY", "visitors alice", func(a []string) (cntCall, error) {
		return one(func(ctx context.Context, c *client.RingClient) (int, error) {
			changed, err := c.UniqueAdd(ctx, a[0], []string{a[1]})
			return flag01(changed), err
		}), client.CheckUniqueAdd(a[0], []string{a[1]})
	}},
	"ucount": {"NAME[,NAME...]", "mon,tue", func(a []string) (cntCall, error) {
		names := strings.Split(a[0], ",")
		return one(func(ctx context.Context, c *client.RingClient) (int64, error) { return c.UniqueCount(ctx, names...) }),
			client.CheckUniqueCount(names)
	}},
}

// one is the call of a command sent to its name's server, printing its
// answer.
func one[T any](f func(ctx context.Context, c *client.RingClient) (T, error)) cntCall {
	return func(ctx context.Context, r *cntRun) error {
		v, err := f(ctx, r.c)
		if err == nil {
			fmt.Fprintln(r.stdout, v)
		}
		return err
	}
}

// each is the call of a command sent to every server (see cntRun.each).
func each(f func(ctx context.Context, c *client.Client, println func(...any)) error) cntCall {
	return func(ctx context.Context, r *cntRun) error {
		return r.each(ctx, func(c *client.Client, println func(...any)) error { return f(ctx, c, println) })
	}
}

// runCnt is `vkcounter cnt`: it runs counter protocol commands against a
// server, printing what yc-cnt prints, and returns the exit code.
func runCnt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cnt", flag.ContinueOnError)
	addr := fs.String("addr", wire.DefaultAddr, "counter server(s), comma-separated `HOST:PORT,...`")
	dns := fs.String("dns", "", "resolve the servers from `HOST:PORT`'s A/AAAA records (e.g. <app>.internal:11215) instead of -addr (not with it)")
	vnodes := fs.Int("vnodes", client.DefaultVirtualNodes, "points per server on the ring; every client of the servers must use the same")
	timeout := fs.Duration("timeout", 5*time.Second, "time limit for connecting and for each command")
	hold := fs.Bool("hold", false, "after the commands, keep the connection (and what it acquired) until interrupted")
	if code, ok := parseFlags(fs, args, cntUsage, stdout, stderr); !ok {
		return code
	}
	cmds, err := parseCnt(fs.Args())
	if err != nil {
		return usageError(stderr, "cnt", err)
	}
	given := givenFlags(fs)
	var addrs []string
	switch {
	case *vnodes < 0:
		return usageError(stderr, "cnt", fmt.Errorf("-vnodes %d: want 0 (the default, %d) or more", *vnodes, client.DefaultVirtualNodes))
	case given["addr"] && given["dns"]:
		return usageError(stderr, "cnt", errors.New("-addr and -dns both name the servers: give one, not both"))
	case *dns != "":
		if host, _, err := net.SplitHostPort(*dns); err != nil || host == "" {
			return usageError(stderr, "cnt", fmt.Errorf("-dns %q: want HOST:PORT, such as counters.internal:11215", *dns))
		}
	default:
		addrs = strings.Split(*addr, ",")
		if _, err := client.NewRing(addrs, *vnodes); err != nil {
			return usageError(stderr, "cnt", fmt.Errorf("-addr %q: %w", *addr, err))
		}
	}

	opts := client.RingOptions{VirtualNodes: *vnodes, DNS: *dns}
	dctx, cancel := context.WithTimeout(ctx, *timeout)
	c, err := client.NewRingClient(dctx, addrs, opts)
	cancel()
	if err != nil {
		servers := "-addr " + *addr
		if *dns != "" {
			servers = "-dns " + *dns
		}
		return failure(stderr, "cnt", fmt.Errorf("cannot find the servers of %s: %w", servers, err))
	}
	defer c.Close()
	r := cntRun{c: c, stdout: stdout, stderr: stderr, prefix: len(c.Servers()) > 1}
	for _, cmd := range cmds {
		cctx, cancel := context.WithTimeout(ctx, *timeout)
		err := cmd.call(cctx, &r)
		cancel()
		if r.statusErr != nil {
			return exitFailure
		}
		var se *wire.StatusError
		if errors.As(err, &se) {
			fmt.Fprintf(stderr, "ERROR: %02x %s\n", byte(se.Status), se.Message)
			return exitFailure
		}
		if err != nil {
			return failure(stderr, "cnt", fmt.Errorf("%s: %w", cmd.name, err))
		}
	}
	if *hold {
		fmt.Fprintln(stderr, "vkcounter cnt: holding the connection; interrupt to release")
		if err := c.Hold(ctx); err != nil {
			return failure(stderr, "cnt", fmt.Errorf("connection lost; nothing is held any more: %w", err))
		}
	}
	return exitOK
}

// A cntCommand is a command as parsed: its name and its call.
type cntCommand struct {
	name string
	call cntCall
}

// parseCnt splits the arguments into commands and checks them. An error
// of the client's checks (wire.ErrInvalid) names the command and its
// arguments; a bad number names itself.
func parseCnt(args []string) ([]cntCommand, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given; for example: noop, or acquire NAME 1 10")
	}
	var cmds []cntCommand
	for len(args) > 0 {
		name := args[0]
		op, ok := cntOps[name]
		if !ok {
			return nil, fmt.Errorf("unknown command %q (see the list with -h)", name)
		}
		n := len(strings.Fields(op.args))
		if len(args)-1 < n {
			synopsis := strings.TrimSpace(name + " " + op.args)
			if op.example != "" {
				synopsis += " (e.g. " + name + " " + op.example + ")"
			}
			return nil, fmt.Errorf("%s needs %d arguments: %s", name, n, synopsis)
		}
		call, err := op.parse(args[1 : 1+n])
		if errors.Is(err, wire.ErrInvalid) {
			return nil, fmt.Errorf("%s %q: %w", name, args[1:1+n], err)
		}
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, cntCommand{name, call})
		args = args[1+n:]
	}
	return cmds, nil
}

func parseUint32(what, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number from 0 to 4294967295, such as 10", what, s)
	}
	return uint32(v), nil
}

// parseWindow parses a WINDOW argument: whole seconds, 1 to
// wire.MaxWindow. Its error speaks seconds, as the user does.
func parseWindow(s string) (time.Duration, error) {
	most := uint64(wire.MaxWindow / time.Second)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < 1 || v > most {
		return 0, fmt.Errorf("%w: WINDOW %q, want whole seconds from 1 to %d (%d days), such as 3600",
			wire.ErrInvalid, s, most, wire.MaxWindow/(24*time.Hour))
	}
	return time.Duration(v) * time.Second, nil
}

// parseTimeout parses a TIMEOUT argument: whole seconds, 0 for the
// server's default.
func parseTimeout(s string) (time.Duration, error) {
	v, err := parseUint32("TIMEOUT", s)
	return time.Duration(v) * time.Second, err
}

// flag01 prints a flag as yc-cnt prints numbers.
func flag01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cntRun runs commands on a ring of servers and prints their answers as
// yc-cnt does.
type cntRun struct {
	c              *client.RingClient
	stdout, stderr io.Writer
	// prefix puts the server's address before each line of noop, stats
	// and dump: set with several servers.
	prefix bool
	// statusErr is the first error status a server answered to a command
	// sent to every server; it was printed on stderr, on a line of its own
	// (prefixed like the server's other lines).
	statusErr *wire.StatusError
}

// each runs fn on every server with a printer for its lines. An error
// status is printed on its server's line and the other servers still run.
func (r *cntRun) each(ctx context.Context, fn func(c *client.Client, println func(a ...any)) error) error {
	return r.c.Each(ctx, func(addr string, c *client.Client) error {
		printer := func(w io.Writer) func(a ...any) {
			if r.prefix {
				return func(a ...any) { fmt.Fprintln(w, append([]any{addr}, a...)...) }
			}
			return func(a ...any) { fmt.Fprintln(w, a...) }
		}
		err := fn(c, printer(r.stdout))
		var se *wire.StatusError
		if errors.As(err, &se) {
			printer(r.stderr)(fmt.Sprintf("ERROR: %02x %s", byte(se.Status), se.Message))
			if r.statusErr == nil {
				r.statusErr = se
			}
			return nil
		}
		return err
	})
}
