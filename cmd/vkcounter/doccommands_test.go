package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsNameTheBinary: every vkcounter command in README.md and docs/ —
// each command line of a shell code block, and each inline command such
// as `vkcounter loadtest …` — runs the binary README §1 builds
// (./vkcounter), `go run ./cmd/vkcounter`, or the image's binary by its
// absolute path: a bare `vkcounter …` is "command not found" after §1's
// `go build -o vkcounter`.
func TestDocsNameTheBinary(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"../../README.md"}, docs...)
	var checked int
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, c := range docCommands(string(raw)) {
			checked++
			if err := checkInvocation(c); err != "" {
				t.Errorf("%s:%d: %s: %q", name, c.line, err, c.text)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d vkcounter commands found in README.md and docs/: the parser misses them", checked)
	}
	t.Logf("%d vkcounter commands checked in %d files", checked, len(files))
}

// A docCommand is one command line naming vkcounter, from a shell code
// block (block) or an inline code span.
type docCommand struct {
	text  string
	line  int
	block bool
}

var (
	fence      = regexp.MustCompile("^\\s*```(\\w*)")
	inlineCode = regexp.MustCompile("`([^`]+)`")
	// shellBlocks are the fence languages whose lines are commands.
	shellBlocks = []string{"sh", "bash", "shell", "console"}
)

// docCommands returns the commands of a markdown text that mention
// vkcounter: each line of a shell code block (joined with its
// continuation lines, without its comment), and each inline code span.
func docCommands(text string) []docCommand {
	var out []docCommand
	lines := strings.Split(text, "\n")
	inBlock, shell := false, false
	var prose strings.Builder
	var proseLines []int // the line of each byte's line in prose, by newline
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := fence.FindStringSubmatch(l); m != nil {
			if inBlock {
				inBlock = false
			} else {
				inBlock, shell = true, slices.Contains(shellBlocks, m[1])
			}
			prose.WriteString("\n")
			proseLines = append(proseLines, i+1)
			continue
		}
		if !inBlock {
			prose.WriteString(l + "\n")
			proseLines = append(proseLines, i+1)
			continue
		}
		prose.WriteString("\n")
		proseLines = append(proseLines, i+1)
		if !shell {
			continue
		}
		start := i + 1
		cmd := l
		for strings.HasSuffix(strings.TrimSpace(cmd), "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(strings.TrimSpace(cmd), "\\") + " " + strings.TrimSpace(lines[i])
			prose.WriteString("\n")
			proseLines = append(proseLines, i+1)
		}
		if j := strings.Index(cmd, " #"); j >= 0 {
			cmd = cmd[:j]
		}
		if strings.Contains(cmd, "vkcounter") {
			out = append(out, docCommand{text: strings.TrimSpace(cmd), line: start, block: true})
		}
	}
	p := prose.String()
	for _, m := range inlineCode.FindAllStringSubmatchIndex(p, -1) {
		span := strings.Join(strings.Fields(p[m[2]:m[3]]), " ")
		if strings.Contains(span, "vkcounter") {
			out = append(out, docCommand{text: span, line: proseLines[strings.Count(p[:m[0]], "\n")]})
		}
	}
	return out
}

// checkInvocation says what is wrong with the way c runs vkcounter, or "".
// In a code block every program in command position is checked; an
// inline span is a command only when vkcounter is followed by a
// subcommand, a placeholder for one or a flag (`vkcounter serving`, a log
// line, is not).
func checkInvocation(c docCommand) string {
	for _, seg := range regexp.MustCompile(`\$\(|&&|\|\||[;|()]`).Split(c.text, -1) {
		words := strings.Fields(seg)
		for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
			words = words[1:] // VAR=value before the program
		}
		if len(words) == 0 {
			continue
		}
		prog, args := words[0], words[1:]
		if prog == "go" && len(args) >= 2 && args[0] == "run" {
			if strings.HasSuffix(args[1], "vkcounter") && args[1] != "./cmd/vkcounter" {
				return "go run of " + args[1] + ", not ./cmd/vkcounter"
			}
			continue
		}
		if filepath.Base(prog) != "vkcounter" || prog == "./vkcounter" || filepath.IsAbs(prog) {
			continue
		}
		if !c.block && (len(args) == 0 || !isSubcommandOrFlag(args[0])) {
			continue
		}
		return "runs " + prog + ", not ./vkcounter (the binary README §1 builds) or go run ./cmd/vkcounter"
	}
	return ""
}

func isSubcommandOrFlag(arg string) bool {
	if strings.HasPrefix(arg, "-") || arg == "COMMAND" || arg == "TOOL" {
		return true
	}
	for _, c := range commands() {
		if c.name == arg {
			return true
		}
	}
	return false
}

// TestReadmeLogLinesAreLogged: each log line the README's deploy section
// tells the reader to look for in `fly logs` is one the program logs,
// word for word (it said "VK accepts every token" of a line that reads "VK
// accepts the token").
func TestReadmeLogLinesAreLogged(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^fly logs +#(.*)$").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `fly logs` line with the lines to look for")
	}
	quoted := regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(m[1], -1)
	if len(quoted) < 2 {
		t.Fatalf("README's fly logs line names %d log lines, want the start-up line and VK's acceptance", len(quoted))
	}
	var sources []byte
	for _, dir := range []string{".", "../../internal/service", "../../bot/tokens"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				b, _ := os.ReadFile(f)
				sources = append(sources, b...)
			}
		}
	}
	for _, q := range quoted {
		if !strings.Contains(string(sources), `Msg("`+string(q[1])+`")`) {
			t.Errorf("README tells to look for %q in the logs: no such line is logged", q[1])
		}
	}
}
