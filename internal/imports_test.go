package internal_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/vkcounter/vkcounter/"

// A rule is one import rule docs/ARCHITECTURE.md states: the packages it
// governs (a path, or a path ending in "/..." for a tree) must not depend
// on any package that forbidden matches, and, if allowed is set, on no
// package of the module that it does not list. Direct rules look at a
// package's own imports, the others at everything it links (Deps).
type rule struct {
	name      string
	pkgs      string
	direct    bool
	forbidden func(dep string) bool
	allowed   []string
	except    []string // packages under pkgs the rule does not govern
}

// programParts are the packages under internal/ that are parts of the
// program, or run it whole for tests (internal/servicetest), not helpers:
// they import the program's packages.
var programParts = []string{"internal/config", "internal/service", "internal/servicetest"}

// rules are the import rules of docs/ARCHITECTURE.md, each checked here.
var rules = []rule{
	{name: "the helpers under internal/ import nothing of the program outside internal/", pkgs: "internal/...", direct: true,
		forbidden: func(d string) bool { return inModule(d) && !under(d, "internal/...") }, except: programParts},
	{name: "internal/config imports no part of the service: it reads the packages' constants, and the service reads it", pkgs: "internal/config",
		forbidden: func(d string) bool {
			return under(d, "cmd/...") || under(d, "metrics") || under(d, "internal/service/...") || under(d, "admin/...")
		}},
	{name: "internal/service imports no cmd: the commands open the service, not the reverse", pkgs: "internal/service",
		forbidden: func(d string) bool { return under(d, "cmd/...") }},
	{name: "internal/servicetest does not import internal/service: it is handed the service's constructor, so the service's own tests use it too", pkgs: "internal/servicetest",
		forbidden: func(d string) bool { return under(d, "internal/service") || under(d, "cmd/...") }},
	{name: "counters/client links the codec alone: no server, no store, no go-redis", pkgs: "counters/client",
		forbidden: func(d string) bool { return strings.Contains(d, "go-redis") },
		allowed:   []string{"counters/client", "counters/wire", "counters/internal/names"}},
	{name: "callback imports neither bot nor freq", pkgs: "callback",
		forbidden: func(d string) bool { return under(d, "bot/...") || under(d, "freq/...") }},
	{name: "bot does not import freq (its outbox does, for the record script)", pkgs: "bot", direct: true,
		forbidden: func(d string) bool { return under(d, "freq/...") }},
	{name: "metrics does not import freq", pkgs: "metrics", direct: true,
		forbidden: func(d string) bool { return under(d, "freq/...") }},
	{name: "counters links no freq: the window store's layout is internal/runlist's", pkgs: "counters/...",
		forbidden: func(d string) bool { return under(d, "freq/...") }},
	{name: "bot/outbox does not import bot", pkgs: "bot/outbox",
		forbidden: func(d string) bool { return d == module+"bot" }},
	{name: "admin reads the service through its snapshot and interfaces: no cmd, settings, counting store or Redis client", pkgs: "admin", direct: true,
		forbidden: func(d string) bool {
			return under(d, "cmd/...") || under(d, "freq/...") || under(d, "internal/config") || under(d, "internal/redisconn") ||
				strings.Contains(d, "go-redis")
		}},
	{name: "admin does not import internal/service: the service fills admin's snapshot and hands it its interfaces", pkgs: "admin",
		forbidden: func(d string) bool { return under(d, "internal/service/...") }},
	{name: "loadtest reaches the program only through its public surfaces", pkgs: "loadtest",
		forbidden: func(d string) bool {
			return inModule(d) && !under(d, "counters/wire") && !under(d, "counters/internal/names") &&
				!under(d, "vktest") && !under(d, "internal/...")
		}},
}

func inModule(path string) bool { return strings.HasPrefix(path, module) }

// under reports whether path is the module's package pattern, or in its
// tree when pattern ends in "/...".
func under(path, pattern string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == module+tree || strings.HasPrefix(path, module+tree+"/")
	}
	return path == module+pattern
}

// TestImportRules checks every rule against go list's view of the module.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath    string
		Imports, Deps []string
	}
	var pkgs []pkg
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checked := 0
			for _, p := range pkgs {
				if !under(p.ImportPath, r.pkgs) || allowedBy(p.ImportPath, r.except) {
					continue
				}
				checked++
				deps := p.Deps
				if r.direct {
					deps = p.Imports
				}
				for _, d := range deps {
					if r.forbidden != nil && r.forbidden(d) {
						t.Errorf("%s depends on %s", p.ImportPath, d)
					}
					if r.allowed != nil && inModule(d) && !allowedBy(d, r.allowed) {
						t.Errorf("%s depends on %s, not in %v", p.ImportPath, d, r.allowed)
					}
				}
			}
			if checked == 0 {
				t.Fatalf("no package matches %s", r.pkgs)
			}
		})
	}
}

func allowedBy(path string, allowed []string) bool {
	for _, a := range allowed {
		if under(path, a) {
			return true
		}
	}
	return false
}
