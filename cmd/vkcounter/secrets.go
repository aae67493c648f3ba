package main

import (
	"encoding/json"
	"flag"
	"regexp"
	"strings"

	"github.com/vkcounter/vkcounter/internal/redact"
)

// secretSetting says whether a setting's value is a secret or holds one
// (a token, a password in a URL): the status page shows only whether it
// is set. This is the one list of secret settings; secretsOf reads the
// secrets out of their values (and passwords out of any address list).
func secretSetting(env string) bool {
	if env == "VK_API_URL" || strings.HasPrefix(env, "REQUIRE_") {
		return false
	}
	return secretName.MatchString(env)
}

var secretName = regexp.MustCompile(`TOKEN|SECRET|PASSWORD|CONFIRMATION|GROUPS|_URL`)

// settingValue is a setting's value as the process runs with it: its
// flag's value (value) and what that prints (val).
type settingValue struct {
	env, val string
	value    flag.Value
}

// settingValues are every setting's value in cfg, as its flag prints it.
func settingValues(cfg Config) []settingValue {
	var c Config
	fs := flag.NewFlagSet("values", flag.ContinueOnError)
	list := settings(&c)
	for _, s := range list {
		s.bind(fs, flagName(s.env), s.help)
	}
	// Binding set each field to its zero default; the flags' values point
	// into c, which now takes cfg.
	c = cfg
	out := make([]settingValue, 0, len(list))
	for _, s := range list {
		v := fs.Lookup(flagName(s.env)).Value
		out = append(out, settingValue{s.env, v.String(), v})
	}
	return out
}

// secretsOf is every secret cfg holds: the values of secret settings
// (each comma-separated part too: token lists), the tokens, secrets and
// confirmation strings of VK_GROUPS, and the password of every URL or
// address with one (REDIS_URL, a REDIS_CLUSTER seed user:password@host).
func secretsOf(cfg Config) []string {
	var out []string
	for _, v := range settingValues(cfg) {
		if v.val == "" {
			continue
		}
		out = append(out, passwords(v.val)...)
		if !secretSetting(v.env) || strings.HasSuffix(v.env, "_URL") {
			continue // a URL's secret is its password
		}
		if v.env == "VK_GROUPS" {
			out = append(out, groupSecrets(v.val)...)
			continue
		}
		out = append(out, v.val)
		if strings.Contains(v.val, ",") {
			out = append(out, strings.Split(v.val, ",")...)
		}
	}
	return out
}

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

// newRedactor is the one redactor of everything the service prints or
// serves: the log's writer (newLogger), the errors at start, /stats,
// /texts, /readyz and the status page (admin.Options.Redactor).
func newRedactor(cfg Config) *redact.Redactor { return redact.New(secretsOf(cfg)...) }
