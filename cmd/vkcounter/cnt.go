package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
)

const cntUsage = `Usage: vkcounter cnt [-addr HOST:PORT[,HOST:PORT...] | -dns HOST:PORT] [-timeout D] [-hold] COMMAND [ARGS] [COMMAND [ARGS]]...

Talks to counter ports like yc-cnt. Commands run in order, on one connection
per server. With several servers (-addr A,B,C, or every address -dns
resolves to), each named command goes to the server owning the name on the
consistent-hashing ring (counters.Ring: ketama, 100 points per server), and
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

// cntCommand is one parsed command: its name, the counter name and the
// other arguments it takes.
type cntCommand struct {
	name      string
	counter   string
	resources uint32
	maximum   uint32
	key       string
	timeout   time.Duration
	delta     int64
}

// cntSynopsis shows each command with its arguments, for errors.
var cntSynopsis = map[string]string{
	"noop": "noop", "get": "get NAME", "acquire": "acquire NAME RESOURCES MAXIMUM (e.g. acquire jobs 1 10)",
	"release": "release NAME RESOURCES (e.g. release jobs 1)", "stats": "stats", "dump": "dump",
	"hit": "hit NAME", "add": "add NAME N (e.g. add pages 5)", "total": "total NAME", "list": "list PREFIX (e.g. list page_)",
	"visit": "visit NAME KEY TIMEOUT (e.g. visit room alice 300)", "leave": "leave NAME KEY",
	"active": "active NAME TIMEOUT (e.g. active room 300)",
	"whit":   "whit NAME WINDOW (e.g. whit api:42 3600)", "wcount": "wcount NAME WINDOW (e.g. wcount api:42 3600)",
	"uadd": "uadd NAME KEY (e.g. uadd visitors alice)", "ucount": "ucount NAME[,NAME...] (e.g. ucount mon,tue)",
}

// cntArity is the number of arguments of each command.
var cntArity = map[string]int{
	"noop": 0, "get": 1, "acquire": 3, "release": 2, "stats": 0, "dump": 0,
	"hit": 1, "add": 2, "total": 1, "list": 1, "visit": 3, "leave": 2, "active": 2,
	"whit": 2, "wcount": 2, "uadd": 2, "ucount": 1,
}

// runCnt is `vkcounter cnt`: it runs counter protocol commands against a
// server, printing what yc-cnt prints, and returns the exit code.
func runCnt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cnt", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:11215", "counter server(s), comma-separated `HOST:PORT,...`")
	dns := fs.String("dns", "", "resolve the servers from `HOST:PORT`'s A/AAAA records (e.g. <app>.internal:11215) instead of -addr (not with it)")
	vnodes := fs.Int("vnodes", counters.DefaultVirtualNodes, "points per server on the ring; every client of the servers must use the same")
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
		return usageError(stderr, "cnt", fmt.Errorf("-vnodes %d: want 0 (the default, %d) or more", *vnodes, counters.DefaultVirtualNodes))
	case given["addr"] && given["dns"]:
		return usageError(stderr, "cnt", errors.New("-addr and -dns both name the servers: give one, not both"))
	case *dns != "":
		if host, _, err := net.SplitHostPort(*dns); err != nil || host == "" {
			return usageError(stderr, "cnt", fmt.Errorf("-dns %q: want HOST:PORT, such as counters.internal:11215", *dns))
		}
	default:
		addrs = strings.Split(*addr, ",")
		if _, err := counters.NewRing(addrs, *vnodes); err != nil {
			return usageError(stderr, "cnt", fmt.Errorf("-addr %q: %w", *addr, err))
		}
	}

	opts := counters.RingOptions{VirtualNodes: *vnodes, DNS: *dns}
	dctx, cancel := context.WithTimeout(ctx, *timeout)
	c, err := counters.NewRingClient(dctx, addrs, opts)
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
		err := r.run(cctx, cmd)
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

// parseCnt splits the arguments into commands and checks their numbers.
func parseCnt(args []string) ([]cntCommand, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given; for example: noop, or acquire NAME 1 10")
	}
	var cmds []cntCommand
	for len(args) > 0 {
		n, ok := cntArity[args[0]]
		if !ok {
			return nil, fmt.Errorf("unknown command %q (see the list with -h)", args[0])
		}
		if len(args)-1 < n {
			return nil, fmt.Errorf("%s needs %d arguments: %s", args[0], n, cntSynopsis[args[0]])
		}
		cmd := cntCommand{name: args[0]}
		if n > 0 {
			cmd.counter = args[1]
		}
		var err error
		switch cmd.name {
		case "acquire":
			if cmd.resources, err = parseUint32("RESOURCES", args[2]); err != nil {
				return nil, err
			}
			if cmd.maximum, err = parseUint32("MAXIMUM", args[3]); err != nil {
				return nil, err
			}
		case "release":
			if cmd.resources, err = parseUint32("RESOURCES", args[2]); err != nil {
				return nil, err
			}
		case "visit":
			cmd.key = args[2]
			if cmd.timeout, err = parseTimeout(args[3]); err != nil {
				return nil, err
			}
		case "add":
			if cmd.delta, err = strconv.ParseInt(args[2], 10, 64); err != nil || cmd.delta < 1 {
				return nil, fmt.Errorf("N %q: want a whole number from 1 to %d, such as 5", args[2], int64(wire.MaxDelta))
			}
		case "leave":
			cmd.key = args[2]
		case "active":
			if cmd.timeout, err = parseTimeout(args[2]); err != nil {
				return nil, err
			}
		case "whit", "wcount":
			if cmd.timeout, err = parseWindow(args[2]); err != nil {
				return nil, fmt.Errorf("%s %q: %w", cmd.name, args[1:1+n], err)
			}
		case "uadd":
			cmd.key = args[2]
		}
		if err := checkCnt(cmd); err != nil {
			return nil, fmt.Errorf("%s %q: %w", cmd.name, args[1:1+n], err)
		}
		cmds = append(cmds, cmd)
		args = args[1+n:]
	}
	return cmds, nil
}

// checkCnt applies the client's own checks to cmd before anything is sent,
// so that a bad command anywhere in the list runs none of them.
func checkCnt(cmd cntCommand) error {
	switch cmd.name {
	case "noop", "stats", "dump":
		return nil
	case "acquire":
		return counters.CheckAcquire(cmd.counter, cmd.resources, cmd.maximum)
	case "whit", "wcount":
		return counters.CheckWindow(cmd.counter, cmd.timeout)
	case "list":
		if len(cmd.counter) > wire.MaxListField {
			return fmt.Errorf("%w: prefix longer than %d bytes", wire.ErrInvalid, wire.MaxListField)
		}
		return nil
	case "uadd":
		return counters.CheckUniqueAdd(cmd.counter, []string{cmd.key})
	case "ucount":
		return counters.CheckUniqueCount(strings.Split(cmd.counter, ","))
	case "visit", "active":
		if err := counters.CheckTimeout(cmd.timeout); err != nil {
			return err
		}
	}
	if cmd.name == "visit" || cmd.name == "leave" {
		if err := wire.CheckKey(cmd.key); err != nil {
			return err
		}
	}
	if cmd.name == "get" || cmd.name == "release" {
		return wire.CheckName(cmd.counter)
	}
	return wire.CheckKindName(cmd.counter)
}

func parseUint32(what, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number from 0 to 4294967295, such as 10", what, s)
	}
	return uint32(v), nil
}

// parseWindow parses a WINDOW argument: whole seconds, 1 to
// window.MaxWindow. Its error speaks seconds, as the user does.
func parseWindow(s string) (time.Duration, error) {
	most := uint64(window.MaxWindow / time.Second)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < 1 || v > most {
		return 0, fmt.Errorf("%w: WINDOW %q, want whole seconds from 1 to %d (%d days), such as 3600",
			wire.ErrInvalid, s, most, window.MaxWindow/(24*time.Hour))
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
	c              *counters.RingClient
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
func (r *cntRun) each(ctx context.Context, fn func(c *counters.Client, println func(a ...any)) error) error {
	return r.c.Each(ctx, func(addr string, c *counters.Client) error {
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

// run runs one command and prints its answer.
func (r *cntRun) run(ctx context.Context, cmd cntCommand) error {
	c, w := r.c, r.stdout
	switch cmd.name {
	case "noop":
		return r.each(ctx, func(c *counters.Client, println func(...any)) error {
			if err := c.Noop(ctx); err != nil {
				return err
			}
			println("OK")
			return nil
		})
	case "stats":
		return r.each(ctx, func(c *counters.Client, println func(...any)) error {
			stats, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			for _, s := range stats {
				println(s.Name, s.Value)
			}
			return nil
		})
	case "dump":
		return r.each(ctx, func(c *counters.Client, println func(...any)) error {
			return c.Dump(ctx, func(e wire.DumpEntry) error {
				println(e.Consumption, e.MaxConsumption, e.Name)
				return nil
			})
		})
	case "get":
		v, err := c.Get(ctx, cmd.counter)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "acquire":
		v, err := c.Acquire(ctx, cmd.counter, cmd.resources, cmd.maximum)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "release":
		if err := c.Release(ctx, cmd.counter, cmd.resources); err != nil {
			return err
		}
		fmt.Fprintln(w, "OK")
	case "hit", "total":
		hitOrTotal := c.Total
		if cmd.name == "hit" {
			hitOrTotal = c.Hit
		}
		v, err := hitOrTotal(ctx, cmd.counter)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "list":
		return r.each(ctx, func(c *counters.Client, println func(...any)) error {
			for after := ""; ; {
				entries, more, err := c.List(ctx, cmd.counter, after, access.MaxListLimit)
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
		})
	case "whit", "wcount":
		op := c.WindowCount
		if cmd.name == "whit" {
			op = c.WindowHit
		}
		v, err := op(ctx, cmd.counter, cmd.timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "uadd":
		changed, err := c.UniqueAdd(ctx, cmd.counter, []string{cmd.key})
		if err != nil {
			return err
		}
		fmt.Fprintln(w, flag01(changed))
	case "ucount":
		v, err := c.UniqueCount(ctx, strings.Split(cmd.counter, ",")...)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "add":
		v, err := c.Add(ctx, cmd.counter, cmd.delta)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, v)
	case "visit":
		n, isNew, err := c.Visit(ctx, cmd.counter, cmd.key, cmd.timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, n, flag01(isNew))
	case "leave":
		n, removed, err := c.Leave(ctx, cmd.counter, cmd.key)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, n, flag01(removed))
	case "active":
		n, err := c.Active(ctx, cmd.counter, cmd.timeout)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, n)
	}
	return nil
}
