package internal_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestInternalImportsOnlyInternal: the program's helpers under internal/
// import nothing of the program outside internal/; the parts import them,
// never the other way round.
func TestInternalImportsOnlyInternal(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Module", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
			Module     struct{ Path string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		internal := p.Module.Path + "/internal/"
		if !strings.HasPrefix(p.ImportPath, internal) {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, p.Module.Path+"/") && !strings.HasPrefix(imp, internal) {
				t.Errorf("%s imports %s, outside internal/", p.ImportPath, imp)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list found no package under internal/")
	}
}
