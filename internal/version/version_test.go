package version_test

import (
	"runtime"
	"testing"

	"github.com/vkcounter/vkcounter/internal/version"
)

func TestGet(t *testing.T) {
	i := version.Get()
	if i.Version == "" || i.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v; want a version and the Go version %s", i, runtime.Version())
	}
}

func TestStampWins(t *testing.T) {
	defer func(old string) { version.Stamp = old }(version.Stamp)
	version.Stamp = "v9.8.7"
	if v := version.Get().Version; v != "v9.8.7" {
		t.Fatalf("Version %q with Stamp v9.8.7", v)
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   version.Info
		want string
	}{
		{version.Info{Version: "(devel)"}, "vkcounter (devel)"},
		{version.Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-11-26T03:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"vkcounter v1.2.3 revision abc123+dirty built from a commit of 2026-11-26T03:00:00Z (go1.26.8)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
