package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
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
	explainValues(fs)
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
	fs.VisitAll(func(f *flag.Flag) { // PrintDefaults names the original types (duration, int, …)
		if e, ok := f.Value.(*explained); ok {
			f.Value = e.Value
		}
	})
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

// explainValues makes every flag of fs that takes a number, a duration or
// a boolean say what it expects when given something else, instead of
// the flag package's "parse error".
func explainValues(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*explained); done {
			return
		}
		if want := expected(f.Value); want != "" {
			f.Value = &explained{Value: f.Value, want: want}
		}
	})
}

// expected describes the values v accepts, or "" for any string.
func expected(v flag.Value) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a Go duration such as 90s, 10m or 24h"
	case int, int64:
		return "a whole number such as 100"
	case uint, uint64:
		return "a whole number, 0 or more, such as 100"
	case float64:
		return "a number such as 20 or 2.5"
	case bool:
		return "true or false"
	}
	return ""
}

// explained wraps a flag.Value so that Set's error says what is expected.
type explained struct {
	flag.Value
	want string
}

func (e *explained) Set(s string) error {
	if err := e.Value.Set(s); err != nil {
		return fmt.Errorf("want %s", e.want)
	}
	return nil
}

// String is the wrapped value's; the flag package calls it on a zero
// explained too.
func (e *explained) String() string {
	if e == nil || e.Value == nil {
		return ""
	}
	return e.Value.String()
}

// Get returns the wrapped value's Get.
func (e *explained) Get() any { return e.Value.(flag.Getter).Get() }

// IsBoolFlag keeps -flag (without =true) working for boolean flags.
func (e *explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
