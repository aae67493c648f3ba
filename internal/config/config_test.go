package config_test

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/headroom"
)

// parse reads every setting from env (nil: none) and args, as serve does.
func parse(env map[string]string, args ...string) (config.Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c, _, err := config.Parse(fs, args, func(k string) string { return env[k] }, func() {})
	return c, err
}

// TestConfigErrors: each bad setting is refused with an error naming it
// and saying what is expected; the settings that would do are accepted.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"bad window", map[string]string{"WINDOW": "soon"}, `WINDOW (environment) "soon": want a Go duration such as 90s, 10m or 24h`},
		{"bad number", map[string]string{"VK_RATE": "fast"}, `VK_RATE (environment) "fast": want a number such as 20 or 2.5`},
		{"bad whole number", map[string]string{"OUTBOX_MAX_LEN": "1e3"}, `OUTBOX_MAX_LEN (environment) "1e3": want a whole number such as 100`},
		{"bad boolean", map[string]string{"NORMALIZE": "yes please"}, `NORMALIZE (environment) "yes please": want true or false`},
		{"fractional window", map[string]string{"WINDOW": "1500ms"}, "WINDOW"},
		{"token without group", map[string]string{"VK_TOKEN": "t"}, "VK_GROUP_ID"},
		{"both redis", map[string]string{"REDIS_URL": "redis://x", "REDIS_CLUSTER": "a:1"}, "REDIS_CLUSTER"},
		{"redis address", map[string]string{"REDIS_URL": "127.0.0.1:6390"}, `REDIS_URL: "127.0.0.1:6390" is an address, not a URL: write redis://127.0.0.1:6390/0`},
		{"redis garbage", map[string]string{"REDIS_URL": "garbage"}, "REDIS_URL: no scheme: want redis://host:6379/0"},
		{"redis scheme", map[string]string{"REDIS_URL": "http://h:6379"}, `REDIS_URL: scheme "http": want redis://host:6379/0`},
		{"redis port", map[string]string{"REDIS_URL": "redis://h:port/0"}, "REDIS_URL: not a URL"},
		{"redis db", map[string]string{"REDIS_URL": "redis://h:6379/zero"}, "REDIS_URL: invalid database number"},
		{"cluster URL", map[string]string{"REDIS_CLUSTER": "redis://a:1"}, `REDIS_CLUSTER: "redis://a:1": seeds are host:port addresses, not URLs`},
		{"cluster seed", map[string]string{"REDIS_CLUSTER": "a:1,b"}, `REDIS_CLUSTER: "b": want comma-separated host:port seed addresses`},
		{"cluster empty seed", map[string]string{"REDIS_CLUSTER": "a:1,"}, `REDIS_CLUSTER: "": want comma-separated host:port`},
		{"require redis", map[string]string{"REQUIRE_REDIS": "true"}, "REQUIRE_REDIS=true: REDIS_URL or REDIS_CLUSTER is required"},
		{"require token", map[string]string{"REQUIRE_VK_TOKEN": "true"}, "REQUIRE_VK_TOKEN=true: community 1 has no token"},
		{"require tokens", map[string]string{"REQUIRE_VK_TOKEN": "true", "VK_GROUPS": `[{"group_id":5,"token":"t"},{"group_id":6}]`}, "REQUIRE_VK_TOKEN=true: community 6 has no token"},
		{"bad groups JSON", map[string]string{"VK_GROUPS": "[{"}, "VK_GROUPS"},
		{"duplicate group", map[string]string{"VK_GROUPS": `[{"group_id":1},{"group_id":1}]`}, "twice"},
		{"groups and group id", map[string]string{"VK_GROUPS": `[{"group_id":1}]`, "VK_GROUP_ID": "2"}, "VK_GROUPS"},
		{"stats interval", map[string]string{"COUNTER_STATS_INTERVAL": "5"}, "COUNTER_STATS_INTERVAL"},
		{"resource store", map[string]string{"RESOURCE_STORE": "file"}, "RESOURCE_STORE"},
		{"resource lease", map[string]string{"RESOURCE_LEASE": "50ms"}, "RESOURCE_LEASE 50ms: must be at least 100ms"},
		{"resource max memory", map[string]string{"RESOURCE_MAX_MEMORY": "0"}, "RESOURCE_MAX_MEMORY 0: must be positive"},
		{"log format", map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"both counters redis", map[string]string{"COUNTERS_REDIS_URL": "redis://x", "COUNTERS_REDIS_CLUSTER": "a:1"}, "COUNTERS_REDIS_CLUSTER: give one"},
		{"counters redis unused", map[string]string{"COUNTERS_REDIS_URL": "redis://x", "COUNTERS_STORE": "memory"}, "only used with COUNTERS_STORE=redis or RESOURCE_STORE=redis"},
		{"counters redis address", map[string]string{"COUNTERS_REDIS_URL": "127.0.0.1:6390"}, `COUNTERS_REDIS_URL: "127.0.0.1:6390" is an address, not a URL: write redis://127.0.0.1:6390/0`},
		{"counters redis garbage", map[string]string{"COUNTERS_REDIS_URL": "redis://:s3cret@h:port/0"}, "COUNTERS_REDIS_URL: not a URL"},
		{"counters cluster URL", map[string]string{"COUNTERS_REDIS_CLUSTER": "redis://a:1"}, `COUNTERS_REDIS_CLUSTER: "redis://a:1": seeds are host:port addresses, not URLs`},
		{"headroom", map[string]string{"COUNTERS_REDIS_HEADROOM": "100"}, "COUNTERS_REDIS_HEADROOM 100: must be 0 to 99"},
		{"negative headroom", map[string]string{"COUNTERS_REDIS_HEADROOM": "-1"}, "COUNTERS_REDIS_HEADROOM"},
		{"api url", map[string]string{"VK_API_URL": "ftp://x/"}, "VK_API_URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	// The settings that would do are accepted.
	for _, env := range []map[string]string{
		{"REDIS_URL": "redis://127.0.0.1:6379/0"}, {"REDIS_URL": "rediss://:pw@h.example:6380"}, {"REDIS_URL": "redis://h"},
		{"REDIS_CLUSTER": "a:1,b:2,[::1]:3"}, {"REQUIRE_REDIS": "true", "REDIS_CLUSTER": "a:1"},
		{"REQUIRE_VK_TOKEN": "true", "VK_GROUP_ID": "5", "VK_TOKEN": "t"},
	} {
		if _, err := parse(env); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestCountersConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown store", map[string]string{"COUNTERS_STORE": "disk"}, "COUNTERS_STORE"},
		{"file without a directory", map[string]string{"COUNTERS_STORE": "file"}, "COUNTERS_DIR: required"},
		{"directory without the file store", map[string]string{"COUNTERS_DIR": "/tmp/x"}, "COUNTERS_DIR"},
		{"no levels", map[string]string{"COUNTERS_FILE_LEVELS": "0"}, "COUNTERS_FILE_LEVELS"},
		{"too many levels", map[string]string{"COUNTERS_FILE_LEVELS": "65"}, "COUNTERS_FILE_LEVELS"},
		{"zero timeout", map[string]string{"COUNTERS_TIMEOUT": "0s"}, "COUNTERS_TIMEOUT"},
		{"bad timeout", map[string]string{"COUNTERS_TIMEOUT": "soon"}, "COUNTERS_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	c, err := parse(nil)
	if err != nil || c.CountersStore != counters.StoreRedis || c.CountersFileLevels != 5 || c.CountersTimeout.Seconds() != 2 {
		t.Fatalf("defaults %+v, %v", c, err)
	}
}

// TestLimitsAreThePackages: a setting's limits are its package's own
// constants: RESOURCE_LEASE takes the resource store's minimum lease (not
// a second of the settings' own), OUTBOX_CLAIM_AFTER the outbox's,
// COUNTER_STATS_INTERVAL the resource table's interval, the headroom the
// guard's; one below is refused, the limit itself accepted.
func TestLimitsAreThePackages(t *testing.T) {
	for _, tc := range []struct {
		env       string
		at, below string
	}{
		{"RESOURCE_LEASE", resource.MinLease.String(), (resource.MinLease - time.Millisecond).String()},
		{"OUTBOX_CLAIM_AFTER", outbox.MinClaimAfter.String(), (outbox.MinClaimAfter - time.Millisecond).String()},
		{"COUNTER_STATS_INTERVAL", "10", "9"},
		{"COUNTERS_REDIS_HEADROOM", "99", "100"},
	} {
		if _, err := parse(map[string]string{tc.env: tc.at}); err != nil {
			t.Errorf("%s=%s: %v, want accepted", tc.env, tc.at, err)
		}
		if _, err := parse(map[string]string{tc.env: tc.below}); err == nil || !strings.Contains(err.Error(), tc.env) {
			t.Errorf("%s=%s: %v, want refused", tc.env, tc.below, err)
		}
	}
	if resource.MinInterval != 10*time.Second || headroom.MaxPercent != 99 {
		t.Fatalf("the cases above assume MinInterval 10s and MaxPercent 99")
	}
	limits := map[string]string{}
	for _, s := range config.Settings() {
		limits[s.Env] = s.Limits
	}
	for env, want := range map[string]string{
		"RESOURCE_LEASE": "at least 100ms", "LONGPOLL_WAIT": "whole seconds, 1s to 1m30s", "WINDOW": "whole seconds, at least 1s",
		"VK_BATCH": "1 to 25", "TOP_TEXTS": "0 to 1000", "COUNTERS_FILE_LEVELS": "1 to 64", "SHUTDOWN_TIMEOUT": "positive",
	} {
		if limits[env] != want {
			t.Errorf("%s limits %q, want %q", env, limits[env], want)
		}
	}
}

// TestFlagOverridesEnvironment: a flag given replaces its variable, whose
// value is then not parsed at all; a bad value still fails when it is used.
func TestFlagOverridesEnvironment(t *testing.T) {
	env := map[string]string{"WINDOW": "abc", "NORMALIZE": "maybe"}
	cfg, err := parse(env, "-window", "1h", "-normalize")
	if err != nil || cfg.Window != time.Hour || !cfg.Normalize {
		t.Fatalf("WINDOW=abc NORMALIZE=maybe with -window 1h -normalize: window %v, normalize %v, error %v; want 1h, true, no error",
			cfg.Window, cfg.Normalize, err)
	}
	_, err = parse(env, "-normalize")
	if err == nil || !strings.Contains(err.Error(), `WINDOW (environment) "abc": want a Go duration`) {
		t.Fatalf("WINDOW=abc without -window: error %v, want the variable's", err)
	}
}

// TestBindSome: a command that reads a few settings under flags of its
// own reads them as serve does: the flag, else the variable, else the
// default; a setting without a flag from the variable alone; nothing else.
func TestBindSome(t *testing.T) {
	read := func(env map[string]string, args ...string) (config.Config, error) {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		r := config.Bind(fs, config.Use{Env: "ADMIN_ADDR", Flag: "addr"}, config.Use{Env: "VK_GROUP_ID", Flag: "group-id"}, config.Use{Env: "VK_GROUPS"})
		if err := fs.Parse(args); err != nil {
			return config.Config{}, err
		}
		return r.Read(func(k string) string { return env[k] })
	}
	c, err := read(nil)
	if err != nil || c.AdminAddr != config.DefaultAdminAddr || c.VKGroupID != 0 || c.Window != 0 {
		t.Errorf("no variable: %+v, %v; want ADMIN_ADDR's default and nothing else", c, err)
	}
	env := map[string]string{"ADMIN_ADDR": ":9", "VK_GROUP_ID": "x", "VK_GROUPS": "[]", "WINDOW": "1h"}
	if c, err = read(env, "-addr", ":7", "-group-id", "5"); err != nil || c.AdminAddr != ":7" || c.VKGroupID != 5 || c.VKGroups != "[]" || c.Window != 0 {
		t.Errorf("flags over variables: %+v, %v", c, err)
	}
	if _, err = read(env); err == nil || !strings.Contains(err.Error(), `VK_GROUP_ID (environment) "x": want a whole number`) {
		t.Errorf("VK_GROUP_ID=x: %v", err)
	}
	if _, err = read(map[string]string{"VK_GROUPS": "x"}, "-group-id", "-1"); err != nil {
		t.Errorf("a command's reading checks the limits of its settings only: %v", err)
	}
}

// TestSecretSettings: the table marks the settings that hold a secret,
// and Secrets reads them by that mark: a value, each token of a list, the
// fields of VK_GROUPS, a URL's password (of any setting: a cluster seed
// user:password@host too), never a public setting's value.
func TestSecretSettings(t *testing.T) {
	var secret []string
	for _, s := range config.Settings() {
		if s.Secret != config.Public {
			secret = append(secret, s.Env)
		}
	}
	want := "REDIS_URL VK_TOKEN VK_SECRET VK_CONFIRMATION VK_GROUPS COUNTERS_REDIS_URL COUNTERS_HTTP_TOKEN"
	if got := strings.Join(secret, " "); got != want {
		t.Errorf("secret settings: %s\nwant %s", got, want)
	}
	c := config.Config{VKToken: "tok-aaaa,tok-bbbb", VKSecret: "the-secret", RedisURL: "redis://:pw-redis@h:6379/0",
		RedisCluster: "u:pw-seed@a:1,b:2", CountersHTTPToken: "bearer-1", KeyPrefix: "public-prefix",
		VKGroups: `[{"group_id":1,"token":"g-token","secret":"g-secret","confirmation":"g-conf"}]`}
	got := config.Secrets(c)
	for _, s := range []string{"tok-aaaa", "tok-bbbb", "tok-aaaa,tok-bbbb", "the-secret", "pw-redis", "pw-seed", "bearer-1", "g-token", "g-secret", "g-conf"} {
		if !slices.Contains(got, s) {
			t.Errorf("Secrets lacks %q: %q", s, got)
		}
	}
	for _, s := range []string{"public-prefix", "redis://:pw-redis@h:6379/0"} {
		if slices.Contains(got, s) {
			t.Errorf("Secrets holds %q, which is no secret (a URL's secret is its password)", s)
		}
	}
	if out := config.Redactor(c).String("token tok-bbbb, url redis://:pw-redis@h"); strings.Contains(out, "tok-bbbb") || strings.Contains(out, "pw-redis") {
		t.Errorf("redacted: %s", out)
	}
	// A refused VK_GROUPS still gives its secrets to the error's redactor.
	if got := config.Secrets(config.Config{VKGroups: `[{"group_id":1,"token":"half-read"`}); !slices.Contains(got, "half-read") {
		t.Errorf("malformed VK_GROUPS: %q", got)
	}
}

// TestConfigurationDocMatchesSettings: docs/CONFIGURATION.md's table has a
// row for every setting, with the default the program uses, and no row
// for a setting the program does not have.
func TestConfigurationDocMatchesSettings(t *testing.T) {
	raw, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\| ([^|]*) \\|").FindAllStringSubmatch(string(raw), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	known := map[string]bool{}
	for _, s := range config.Settings() {
		known[s.Env] = true
		want := "`" + s.Default + "`"
		if s.Default == "" {
			want = "empty"
		}
		switch got, ok := rows[s.Env]; {
		case !ok:
			t.Errorf("docs/CONFIGURATION.md has no row for %s", s.Env)
		case got != want:
			t.Errorf("docs/CONFIGURATION.md: %s defaults to %s, the program to %s", s.Env, got, want)
		}
	}
	for env := range rows {
		if !known[env] {
			t.Errorf("docs/CONFIGURATION.md documents %s, which is no setting", env)
		}
	}
}
