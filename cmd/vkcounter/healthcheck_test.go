package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// TestHealthcheck: `vkcounter healthcheck` exits 0 while the service is
// ready, 1 with /readyz's reason while it is not (VK refuses the token)
// or nothing answers, and 2 on a usage error; it reads ADMIN_ADDR, and an
// address without a host is asked on loopback.
func TestHealthcheck(t *testing.T) {
	a := startApp(t, nil, map[string]string{"REQUIRE_VK_TOKEN": "true"})
	check := func(env map[string]string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"healthcheck"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	_, port, _ := net.SplitHostPort(a.AdminAddr())
	eventually.NoError(t, 10*time.Second, "healthcheck ready", func() error {
		if code, out, errs := check(map[string]string{"ADMIN_ADDR": ":" + port}); code != exitOK || out != "ready\n" {
			return fmt.Errorf("exit %d: %q", code, out+errs)
		}
		return nil
	})
	if code, out, _ := check(nil, "-addr", "0.0.0.0:"+port); code != exitOK || out != "ready\n" {
		t.Errorf("-addr 0.0.0.0:%s: %d %q, want 0 ready", port, code, out)
	}

	a.VK.FailAlways(5)
	a.MustOK(t, servicetest.Event("hc", 1, 1, "x")) // its send meets the refusal
	eventually.NoError(t, 10*time.Second, "healthcheck not ready", func() error {
		code, _, errs := check(map[string]string{"ADMIN_ADDR": a.AdminAddr()})
		if code != exitFailure || !strings.Contains(errs, "503 not ready: vk: ") {
			return fmt.Errorf("exit %d: %q", code, errs)
		}
		return nil
	})

	closed := tcptest.FreeAddr(t)
	if code, _, errs := check(nil, "-addr", closed, "-timeout", "2s"); code != exitFailure || !strings.Contains(errs, "vkcounter healthcheck: ") {
		t.Errorf("nothing listening: %d %q, want 1 with the error", code, errs)
	}
	for _, args := range [][]string{{"-addr", "nonsense"}, {"extra"}, {"-timeout", "soon"}} {
		if code, _, errs := check(nil, args...); code != exitUsage {
			t.Errorf("healthcheck %v: %d %q, want 2", args, code, errs)
		}
	}
}
