package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/internal/config"
)

const healthcheckUsage = `Usage: vkcounter healthcheck [flags]

Asks /readyz on the admin address of the service running beside it
(ADMIN_ADDR, as the service reads it; an address without a host, such as
the image's ":9090", is asked on loopback) and exits 0 when it is ready,
1 when it is not or does not answer, printing the reason. It is the
container's health check: the image has no shell and no HTTP client
(compose.yaml: test: ["CMD", "/usr/local/bin/vkcounter", "healthcheck"]).

Flags:
`

// runHealthcheck is `vkcounter healthcheck`.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	settings := config.Bind(fs, config.Use{Env: "ADMIN_ADDR", Flag: "addr", Help: "admin address of the service (default ADMIN_ADDR, else " + config.DefaultAdminAddr + ")"})
	timeout := fs.Duration("timeout", 5*time.Second, "longest wait for the answer")
	if code, ok := parseFlags(fs, args, healthcheckUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "healthcheck", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	cfg, err := settings.Read(getenv)
	if err != nil {
		return usageError(stderr, "healthcheck", err)
	}
	target, err := dialable(cfg.AdminAddr)
	if err != nil {
		return usageError(stderr, "healthcheck", fmt.Errorf("-addr: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/readyz", nil)
	if err != nil {
		return usageError(stderr, "healthcheck", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return failure(stderr, "healthcheck", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	reason := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return failure(stderr, "healthcheck", fmt.Errorf("%s: %d %s", req.URL, resp.StatusCode, reason))
	}
	fmt.Fprintln(stdout, reason)
	return exitOK
}

// dialable turns a listen address into one to connect to: no host, or an
// unspecified one (0.0.0.0, ::), is this machine's loopback.
func dialable(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.To4() != nil && ip.IsUnspecified()):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}
