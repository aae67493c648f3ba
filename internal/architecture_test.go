package internal_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readDoc returns a document of docs/ by name.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestArchitectureListsEveryImportRule checks that the import rules
// docs/ARCHITECTURE.md lists are the rules TestImportRules checks, word for
// word: a rule added to one and not the other fails here.
func TestArchitectureListsEveryImportRule(t *testing.T) {
	doc := readDoc(t, "ARCHITECTURE.md")
	_, section, ok := strings.Cut(doc, "\n## Import rules\n")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no section \"## Import rules\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		if item, ok := strings.CutPrefix(line, "- "); ok {
			listed = append(listed, strings.ReplaceAll(item, "`", ""))
		}
	}
	var checked []string
	for _, r := range rules {
		checked = append(checked, r.name)
	}
	for _, name := range checked {
		if !slices.Contains(listed, name) {
			t.Errorf("rule %q is checked but not listed in docs/ARCHITECTURE.md", name)
		}
	}
	for _, item := range listed {
		if !slices.Contains(checked, item) {
			t.Errorf("docs/ARCHITECTURE.md lists %q, which no rule in imports_test.go checks", item)
		}
	}
}

// repoPath matches a path inside the repository as the documents write
// it: directories and a file with its extension (a * stands for a part of
// a name).
var repoPath = regexp.MustCompile(`\b(?:admin|bot|callback|cmd|counters|freq|internal|loadtest|metrics|vktest|deploy|bench)(?:/[A-Za-z0-9_.*-]+)*\.(?:go|lua|html|yml|json|sh)\b`)

// TestArchitectureNamesFilesThatExist checks that every file the map of the
// code names (the drawings, the packages, where each rule lives) and every
// package of its table is there, so that a newcomer's path from a rule to
// its file ends at a file.
func TestArchitectureNamesFilesThatExist(t *testing.T) {
	for _, name := range []string{"ARCHITECTURE.md", "REDIS.md"} {
		doc := readDoc(t, name)
		found := 0
		for _, p := range repoPath.FindAllString(doc, -1) {
			if !strings.Contains(p, "/") {
				continue
			}
			found++
			matches, err := filepath.Glob(filepath.Join("..", p))
			if err != nil || len(matches) == 0 {
				t.Errorf("docs/%s names %s, which is not in the repository", name, p)
			}
		}
		if name == "ARCHITECTURE.md" && found < 30 {
			t.Errorf("docs/%s names %d files; the map should lead to the files that hold the rules", name, found)
		}
	}
	// The first column of the package table: `pkg`, or `dir/…`, or a list
	// of packages in one directory (`counters/access`, `participant`).
	doc := readDoc(t, "ARCHITECTURE.md")
	_, table, _ := strings.Cut(doc, "\n## The packages\n")
	table, _, _ = strings.Cut(table, "\n## ")
	cell := regexp.MustCompile("`([^`]+)`")
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		first := strings.Split(line, "|")[1]
		dir := ""
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			pkg := strings.TrimSuffix(m[1], "/…")
			if i := strings.LastIndex(pkg, "/"); i >= 0 {
				dir = pkg[:i+1]
			} else if dir != "" {
				pkg = dir + pkg
			}
			if st, err := os.Stat(filepath.Join("..", pkg)); err != nil || !st.IsDir() {
				t.Errorf("docs/ARCHITECTURE.md's package table names %s, which is not a directory", pkg)
			}
		}
	}
	if rows < 20 {
		t.Errorf("docs/ARCHITECTURE.md's package table has %d rows", rows)
	}
}
