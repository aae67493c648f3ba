// Command vkcounter is a VK community bot that answers every message with
// how many times the same message was received in the last 24 hours, and a
// counter server speaking the yrmcds counter protocol.
//
// Usage:
//
//	vkcounter [serve] [flags]   run the service (the default)
//	vkcounter cnt …             talk to a counter port, like yc-cnt
//	vkcounter loadtest …        simulate traffic and check every answer
//	vkcounter setup -url …      register the Callback server with VK
//	vkcounter prefill …         store expired occurrences of texts
//	vkcounter count TEXT…       how many times texts were seen (reads only)
//	vkcounter healthcheck       ask the service's /readyz (exit 0 ready, 1 not)
//	vkcounter version           print the build's version
//
// Every command exits 0 on success, 1 on a failure while running and 2 on
// a usage error; help goes to stdout, errors to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/ratelog"
	"github.com/vkcounter/vkcounter/internal/service"
	"github.com/vkcounter/vkcounter/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// A command is one subcommand of vkcounter.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order the help shows them.
func commands() []command {
	return []command{
		{"serve", "run the service (the default when no command is given)", runServe},
		{"cnt", "talk to a counter port, like yc-cnt", func(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
			return runCnt(ctx, args, stdout, stderr)
		}},
		{"loadtest", "simulate VK and counter traffic and check every answer", func(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
			return runLoadtest(ctx, args, stdout, stderr)
		}},
		{"setup", "register the community's Callback API server with VK", runSetup},
		{"prefill", "store expired occurrences of texts (stdin) in the service's Redis, as the service counts them", func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
			return runPrefill(ctx, args, getenv, os.Stdin, stdout, stderr)
		}},
		{"count", "print how many times texts were seen in the window, as the bot counts them (reads only)", runCount},
		{"healthcheck", "ask the service's /readyz on ADMIN_ADDR: exit 0 ready, 1 not (the container's health check)", runHealthcheck},
		{"version", "print the version and build of this binary", runVersion},
	}
}

// printCommands writes the top of every `vkcounter -h`: the subcommands
// and the exit-code rule.
func printCommands(w io.Writer) {
	fmt.Fprintln(w, "Usage: vkcounter [COMMAND] [flags]")
	fmt.Fprintln(w, "\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n\"vkcounter COMMAND -h\" shows a command's flags. Exit status: 0 success, 1 failure while")
	fmt.Fprintln(w, "running, 2 usage error.")
}

// run dispatches a subcommand and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	name := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		name, args = "serve", []string{"-h"}
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args, getenv, stdout, stderr)
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return usageError(stderr, "", fmt.Errorf("unknown command %q (%s)", name, strings.Join(names, ", ")))
}

// runVersion is `vkcounter version`.
func runVersion(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if code, ok := parseFlags(fs, args, "Usage: vkcounter version\n\nPrints the module version, VCS revision and Go version of this binary.\n", stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "version", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	fmt.Fprintln(stdout, version.Get())
	return exitOK
}

// parseConfig reads the serve configuration (config.Parse): defaults, then
// environment variables, then flags. On -h it prints the commands and
// every setting to usageOut and returns flag.ErrHelp.
func parseConfig(args []string, getenv func(string) string, usageOut io.Writer) (config.Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	return parseNoArgs(fs, args, getenv, func() {
		printCommands(usageOut)
		fmt.Fprintln(usageOut, "\nUsage: vkcounter [serve] [flags]")
		fmt.Fprintln(usageOut, "\nRuns the service. Every setting is an environment variable; the flag of the same name overrides it.")
		fmt.Fprintln(usageOut)
		config.PrintTable(usageOut)
	})
}

// parseNoArgs is config.Parse for a command that takes no arguments after
// its flags.
func parseNoArgs(fs *flag.FlagSet, args []string, getenv func(string) string, help func()) (config.Config, error) {
	c, rest, err := config.Parse(fs, args, getenv, help)
	if len(rest) > 0 {
		return c, fmt.Errorf("unexpected argument %q", rest[0])
	}
	return c, err
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	// The settings read so far, even refused ones, give the secrets
	// their error must not print.
	if err != nil {
		return usageError(config.Redactor(cfg).Writer(stderr), "serve", err)
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return usageError(config.Redactor(cfg).Writer(stderr), "serve", err)
	}
	redis.SetLogger(redisLogger{ratelog.New(log.With().Str("component", "go-redis").Logger(), service.FailureLogEvery)})
	m := service.New(cfg, log)
	if err := m.Run(ctx); err != nil {
		log.Error().Err(err).Msg("cannot start")
		return exitFailure
	}
	<-ctx.Done()
	log.Info().Stringer("timeout", cfg.ShutdownTimeout).Msg("shutting down")
	if err := m.Close(); err != nil {
		log.Error().Err(err).Msg("shutdown incomplete")
		return exitFailure
	}
	log.Info().Msg("stopped")
	return exitOK
}
