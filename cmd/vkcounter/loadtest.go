package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vkcounter/vkcounter/loadtest"
)

const loadtestHelp = `Usage:
  vkcounter loadtest callback [flags]   post VK Callback API events to a bot and check every reply
  vkcounter loadtest counters [flags]   drive a counter port and check every response

Both report progress on stderr (a live line on a terminal, a plain line
every 10 seconds otherwise), then print a summary (or -json) on stdout.
"callback -url" first prints on stdout the service to start (on stderr
with -json) and waits for it.
They exit 0 when every answer was right, 1 if any was wrong or the run
could not be made, 2 on a usage error (nothing is sent). Targets must be on
the loopback unless -allow-remote is given. "vkcounter loadtest TOOL -h"
lists a tool's flags.
`

// A loadTool is one tool of `vkcounter loadtest`, met by
// loadtest.CallbackCommand and loadtest.CountersCommand: the load tool owns
// its flags, their one check and the run.
type loadTool interface {
	Bind(fs *flag.FlagSet)
	Validate() error
	// Run makes the run: what the user must do goes to say, progress to
	// stderr.
	Run(ctx context.Context, say, stderr io.Writer) (*loadtest.Report, error)
}

// runLoadtest is `vkcounter loadtest`: it runs one load tool and returns
// the exit code.
func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, loadtestHelp)
		return exitUsage
	}
	switch args[0] {
	case "callback":
		return runLoadTool(ctx, "callback", loadtest.CallbackUsage, &loadtest.CallbackCommand{Prefill: prefillWith}, args[1:], stdout, stderr)
	case "counters":
		return runLoadTool(ctx, "counters", loadtest.CountersUsage, &loadtest.CountersCommand{}, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, loadtestHelp)
		return exitOK
	}
	return usageError(stderr, "loadtest", fmt.Errorf("unknown tool %q (callback, counters)", args[0]))
}

// runLoadTool parses the tool's flags and the output's, has the tool check
// them and run, and prints its report.
func runLoadTool(ctx context.Context, name, usage string, tool loadTool, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest "+name, flag.ContinueOnError)
	json := fs.Bool("json", false, "print the summary as JSON")
	report := fs.String("report", "", "also write a self-contained HTML report (latency over time, histogram) to `FILE`")
	tool.Bind(fs)
	if code, ok := parseFlags(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if err := tool.Validate(); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	say := stdout // what the user must do (with -url: the service to start)
	if *json {
		say = stderr // stdout is the JSON document's alone
	}
	rep, err := tool.Run(ctx, say, stderr)
	if err == nil {
		err = writeReport(rep, *json, *report, stdout)
	}
	if err != nil {
		return failure(stderr, fs.Name(), err)
	}
	if !rep.OK() {
		return exitFailure
	}
	return exitOK
}

// writeReport prints the report (as JSON, or as a table) and writes the
// HTML page to path, if given.
func writeReport(rep *loadtest.Report, json bool, path string, stdout io.Writer) error {
	write := rep.WriteTable
	if json {
		write = rep.WriteJSON
	}
	if err := write(stdout); err != nil || path == "" {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// prefillWith is the load tool's prefill: `vkcounter prefill` with the
// settings of the bot it runs (env, the others from this process's
// environment), so it writes the keys the bot reads.
func prefillWith(ctx context.Context, env map[string]string, texts []string, n int) error {
	cfg, err := parseConfig(nil, func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}, io.Discard)
	if err != nil {
		return fmt.Errorf("the bot's settings: %w", err)
	}
	return prefill(ctx, cfg, texts, n)
}
