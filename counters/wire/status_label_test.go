package wire_test

import (
	"regexp"
	"testing"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// TestStatusLabels: every known status has a distinct snake_case label.
func TestStatusLabels(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]bool{}
	for _, s := range wire.Statuses() {
		l := s.Label()
		if !snake.MatchString(l) || seen[l] {
			t.Errorf("status 0x%02x: label %q is not a distinct snake_case name", byte(s), l)
		}
		seen[l] = true
	}
	if len(seen) < 8 || wire.StatusNotFound.Label() != "not_found" || wire.Status(0x99).Label() != "0x99" {
		t.Errorf("labels %v", seen)
	}
}
