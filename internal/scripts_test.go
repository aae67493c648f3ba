package internal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// replicateCall matches a call of redis.replicate_commands that is not the
// argument of a pcall: Upstash answers the call "not supported", which
// stops the script, and every supported server replicates scripts by their
// effects anyway.
var replicateCall = regexp.MustCompile(`replicate_commands\s*\(`)

// unguardedReplicate returns the 1-based numbers of the lines of src that
// call redis.replicate_commands outside a pcall, comments (Lua's "--" and
// Go's "//") left out.
func unguardedReplicate(src string) []int {
	var lines []int
	for i, line := range strings.Split(src, "\n") {
		for _, mark := range []string{"--", "//"} {
			if at := strings.Index(line, mark); at >= 0 {
				line = line[:at]
			}
		}
		line = strings.ReplaceAll(line, "pcall(redis.replicate_commands)", "")
		if replicateCall.MatchString(line) || strings.Contains(line, "redis.replicate_commands") {
			lines = append(lines, i+1)
		}
	}
	return lines
}

func TestUnguardedReplicateFindsTheCall(t *testing.T) {
	for src, want := range map[string]int{
		"if redis.replicate_commands then redis.replicate_commands() end": 1,
		"redis.replicate_commands()":                                      1,
		"local ok = pcall(redis.replicate_commands)":                      0,
		"-- redis.replicate_commands() is not called":                     0,
		"local t = redis.call('TIME')":                                    0,
	} {
		if got := len(unguardedReplicate(src)); got != want {
			t.Errorf("%q: %d lines found, want %d", src, got, want)
		}
	}
}

// TestNoScriptCallsReplicateCommands reads every Lua file of the module and
// every Go file that may hold a script inline: none calls
// redis.replicate_commands outside a pcall.
func TestNoScriptCallsReplicateCommands(t *testing.T) {
	scanned := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != ".." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".lua") && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".lua") {
			scanned++
		}
		for _, n := range unguardedReplicate(string(src)) {
			t.Errorf("%s:%d calls redis.replicate_commands outside a pcall", path, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 20 {
		t.Fatalf("only %d Lua files found: is the walk rooted at the module?", scanned)
	}
}
