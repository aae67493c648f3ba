package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// A Use binds one setting to a command's flag of another name (Flag, ""
// for none: the environment and the default only), with the command's own
// help.
type Use struct {
	Env, Flag, Help string
}

// A Reader reads settings for one command: Bind binds them to the
// command's flags, the command parses its arguments, then Read fills
// every setting whose flag was not given from the environment, else its
// default. It is the one way every command reads the settings.
type Reader struct {
	fs    *flag.FlagSet
	c     *Config
	list  []Setting
	flags map[string]string // Env → flag name, "" for none
}

// Bind binds the settings to fs: with no uses, every setting under its
// own flag (FlagName); else only the settings named, under the flags
// they name. Flags that take numbers, durations or booleans say what they
// expect when given something else (Explain).
func Bind(fs *flag.FlagSet, uses ...Use) *Reader {
	r := &Reader{fs: fs, c: new(Config), flags: map[string]string{}}
	all := table(r.c)
	if len(uses) == 0 {
		for _, s := range all {
			uses = append(uses, Use{Env: s.Env, Flag: FlagName(s.Env), Help: s.Help})
		}
	}
	for _, u := range uses {
		for _, s := range all {
			if s.Env != u.Env {
				continue
			}
			r.list = append(r.list, s)
			r.flags[s.Env] = u.Flag
			if u.Flag != "" {
				s.bind(fs, u.Flag, u.Help)
			}
		}
	}
	Explain(fs)
	return r
}

// Read fills the settings bound whose flags fs's parsed command line did
// not give, each from its environment variable (getenv), else its
// default, and checks each against its limits. A flag given overrides its
// variable, which is then not even parsed. A value that does not parse is
// an error naming the variable and where the value came from.
func (r *Reader) Read(getenv func(string) string) (Config, error) {
	if err := r.set(getenv); err != nil {
		return *r.c, err
	}
	return *r.c, r.check()
}

// set sets the settings bound whose flags were not given, from getenv or
// their defaults.
func (r *Reader) set(getenv func(string) string) error {
	given := map[string]bool{}
	r.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	scratch := flag.NewFlagSet("", flag.ContinueOnError)
	for _, s := range r.list {
		name := r.flags[s.Env]
		if name != "" && given[name] {
			continue
		}
		v, src := s.Default, "default"
		if e := getenv(s.Env); e != "" {
			v, src = e, "environment"
		}
		if v == "" {
			continue
		}
		fs := r.fs
		if name == "" { // no flag: bound here to be set
			fs, name = scratch, FlagName(s.Env)
			s.bind(fs, name, "")
			Explain(fs)
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s (%s) %q: %v", s.Env, src, v, err)
		}
	}
	return nil
}

// check checks every setting bound against its limits, each bad one in
// an error of its own.
func (r *Reader) check() error {
	var errs []error
	for _, s := range r.list {
		if s.check != nil {
			errs = append(errs, s.check(s.Env))
		}
	}
	return errors.Join(errs...)
}

// Parse is the reading of a command that takes every setting, under its
// own flag, besides the flags already bound to fs: it parses args, reads
// the settings and checks them together (Check). It returns the arguments
// after the flags. On -h it calls help and returns flag.ErrHelp, without
// reading a setting.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string, help func()) (Config, []string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	r := Bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
		}
		return *r.c, nil, err
	}
	if err := r.set(getenv); err != nil {
		return *r.c, nil, err
	}
	return *r.c, fs.Args(), errors.Join(r.check(), r.c.Check())
}

// PrintTable lists every setting with its flag, its default and what it
// means, its limits last.
func PrintTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tFLAG\tDEFAULT\tMEANING")
	for _, s := range Settings() {
		def := s.Default
		if def == "" {
			def = `""`
		}
		help := s.Help
		if s.Limits != "" {
			help += " (" + s.Limits + ")"
		}
		fmt.Fprintf(tw, "%s\t-%s\t%s\t%s\n", s.Env, FlagName(s.Env), def, help)
	}
	tw.Flush()
}

// Explain makes every flag of fs that takes a number, a duration or a
// boolean say what it expects when given something else, instead of the
// flag package's "parse error".
func Explain(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*explained); done {
			return
		}
		if want := expected(f.Value); want != "" {
			f.Value = &explained{Value: f.Value, want: want}
		}
	})
}

// Unexplain undoes Explain, so that fs.PrintDefaults names the flags'
// types (duration, int, …).
func Unexplain(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if e, ok := f.Value.(*explained); ok {
			f.Value = e.Value
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
