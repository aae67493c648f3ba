package main

import (
	"os"
	"regexp"
	"testing"
)

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
