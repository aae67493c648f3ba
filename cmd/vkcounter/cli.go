package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vkcounter/vkcounter/internal/config"
)

// The exit codes of every subcommand.
const (
	exitOK      = 0 // success
	exitFailure = 1 // failure while running: a wrong answer, a lost connection, a server error
	exitUsage   = 2 // usage error: bad flags, arguments or settings; nothing was done
)

// parseFlags parses args into fs with the conventions every subcommand
// shares: -h or -help prints usage and fs's flags to stdout (code exitOK);
// a bad flag or value prints one error line and a pointer to -h on stderr
// (code exitUsage). ok is false when the command should exit with code.
// Values that fail to parse are reported with what is expected.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	config.Explain(fs)
	fs.SetOutput(io.Discard) // the flag package would print the error and the usage itself
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs, usage, stdout)
		return exitOK, false
	case err != nil:
		return usageError(stderr, fs.Name(), err), false
	}
	return exitOK, true
}

// printUsage writes usage and then fs's flags with their defaults to w.
func printUsage(fs *flag.FlagSet, usage string, w io.Writer) {
	config.Unexplain(fs) // PrintDefaults names the original types (duration, int, …)
	fmt.Fprint(w, usage)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError reports a usage error of the subcommand cmd (e.g. "cnt",
// "loadtest counters") on stderr and returns exitUsage.
func usageError(stderr io.Writer, cmd string, err error) int {
	name := strings.TrimSpace("vkcounter " + cmd)
	fmt.Fprintf(stderr, "%s: %v\nRun \"%s -h\" for usage.\n", name, err, name)
	return exitUsage
}

// failure reports a failure while running on stderr and returns exitFailure.
func failure(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "vkcounter %s: %v\n", cmd, err)
	return exitFailure
}

// plural is "1 text" or "n texts": n and the noun, in the plural unless n
// is 1.
func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// givenFlags returns the names of the flags set on fs's command line.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}
