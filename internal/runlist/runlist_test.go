package runlist_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/runlist"
)

// TestTimeArg: the seconds from 1970 to the end of 9999 pass, as decimal
// unix seconds truncated to the second; the others are refused.
func TestTimeArg(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Time
		want string
		ok   bool
	}{
		{"epoch", time.Unix(0, 0), "0", true},
		{"truncated", time.Unix(1_700_000_000, 999_999_999), "1700000000", true},
		{"end of 9999", time.Unix(runlist.MaxUnix, 0), "253402300799", true},
		{"before 1970", time.Unix(-1, 0), "", false},
		{"year 10000", time.Unix(runlist.MaxUnix+1, 0), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := runlist.TimeArg(tc.at); got != tc.want || ok != tc.ok {
				t.Fatalf("TimeArg(%v) = %q, %v; want %q, %v", tc.at, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestLua: the library defines the functions its users call.
func TestLua(t *testing.T) {
	for _, fn := range []string{"parse", "last", "seen", "clock", "trim", "count"} {
		if !strings.Contains(runlist.Lua(), "local function "+fn+"(") {
			t.Errorf("count.lua defines no %s", fn)
		}
	}
}
