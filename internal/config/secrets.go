package config

import (
	"encoding/json"
	"flag"
	"regexp"
	"strings"

	"github.com/vkcounter/vkcounter/internal/redact"
)

// A Value is a setting's value as the process runs with it: its flag's
// value (Flag, for its type) and what that prints (Text).
type Value struct {
	Env    string
	Text   string
	Secret Secrecy
	Flag   flag.Value
}

// Values are every setting's value in cfg, as its flag prints it.
func Values(cfg Config) []Value {
	var c Config
	fs := flag.NewFlagSet("values", flag.ContinueOnError)
	list := table(&c)
	for _, s := range list {
		s.bind(fs, FlagName(s.Env), s.Help)
	}
	// Binding set each field to its zero default; the flags' values point
	// into c, which now takes cfg.
	c = cfg
	out := make([]Value, 0, len(list))
	for _, s := range list {
		v := fs.Lookup(FlagName(s.Env)).Value
		out = append(out, Value{Env: s.Env, Text: v.String(), Secret: s.Secret, Flag: v})
	}
	return out
}

// Secrets is every secret cfg holds, as the table marks them: the values
// of secret settings (each comma-separated part too: token lists), the
// tokens, secrets and confirmation strings of VK_GROUPS, and the password
// of every URL or address with one (REDIS_URL, a REDIS_CLUSTER seed
// user:password@host).
func Secrets(cfg Config) []string {
	var out []string
	for _, v := range Values(cfg) {
		if v.Text == "" {
			continue
		}
		out = append(out, passwords(v.Text)...)
		switch v.Secret {
		case Groups:
			out = append(out, groupSecrets(v.Text)...)
		case Whole:
			out = append(out, v.Text)
			if strings.Contains(v.Text, ",") {
				out = append(out, strings.Split(v.Text, ",")...)
			}
		}
	}
	return out
}

// Redactor is the one redactor of everything the service prints or
// serves: cfg's secrets (Secrets).
func Redactor(cfg Config) *redact.Redactor { return redact.New(Secrets(cfg)...) }

// passwords are the passwords (or lone user parts, which Redis clients
// take as one) of the URLs and addresses in the comma-separated v.
func passwords(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		_, rest, ok := strings.Cut(part, "://")
		if !ok {
			rest = part
		}
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			continue
		}
		user, pw, hasPw := strings.Cut(rest[:at], ":")
		if !hasPw {
			pw = user
		}
		out = append(out, pw)
	}
	return out
}

// groupSecrets are the tokens, secrets and confirmation strings of a
// VK_GROUPS value, read leniently: a value the settings refuse still has
// its secrets removed from the error that says so.
func groupSecrets(v string) []string {
	var out []string
	var list []map[string]any
	if json.Unmarshal([]byte(v), &list) == nil {
		for _, g := range list {
			for _, k := range []string{"token", "secret", "confirmation"} {
				if s, ok := g[k].(string); ok {
					out = append(out, s)
					out = append(out, strings.Split(s, ",")...)
				}
			}
		}
		return out
	}
	for _, m := range groupField.FindAllStringSubmatch(v, -1) {
		out = append(out, m[1])
		out = append(out, strings.Split(m[1], ",")...)
	}
	return out
}

var groupField = regexp.MustCompile(`"(?:token|secret|confirmation)"\s*:\s*"([^"]*)"`)
