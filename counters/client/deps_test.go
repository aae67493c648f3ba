package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServer: a program that imports the client links the
// protocol codec, not the server, the stores or go-redis.
func TestClientLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	const module = "github.com/vkcounter/vkcounter/"
	allowed := map[string]bool{
		module + "counters/client":         true,
		module + "counters/wire":           true,
		module + "counters/internal/names": true,
	}
	for _, d := range deps {
		switch {
		case strings.Contains(d, "go-redis"), strings.HasPrefix(d, module) && !allowed[d]:
			t.Errorf("the client links %s", d)
		}
	}
}
