package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

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
	var c Config
	known := map[string]bool{}
	for _, s := range settings(&c) {
		known[s.env] = true
		want := "`" + s.def + "`"
		if s.def == "" {
			want = "empty"
		}
		switch got, ok := rows[s.env]; {
		case !ok:
			t.Errorf("docs/CONFIGURATION.md has no row for %s", s.env)
		case got != want:
			t.Errorf("docs/CONFIGURATION.md: %s defaults to %s, the program to %s", s.env, got, want)
		}
	}
	for env := range rows {
		if !known[env] {
			t.Errorf("docs/CONFIGURATION.md documents %s, which is no setting", env)
		}
	}
}

// TestReadmeTestCommandIsCIs: .ci/run runs the README's test command, word
// for word, so what CI proves is what a user runs.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^```sh\n(go test [^\n]*)\n```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```sh block with the go test command")
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(string(m[1])) + `$`).Match(ci) {
		t.Errorf(".ci/run does not run the README's test command %q on a line of its own", m[1])
	}
}
