package main

import (
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/service"
	"github.com/vkcounter/vkcounter/internal/servicetest"
)

// app is the whole service running on :0 ports for a test of a command
// that talks to it.
type app struct{ *servicetest.Env }

// startApp runs the service as `vkcounter serve` does, against tg (nil =
// the embedded Redis) and a fresh fake VK API; env overrides the test
// defaults (servicetest.Start).
func startApp(t testing.TB, tg *redistest.Target, env map[string]string) *app {
	t.Helper()
	_, e := servicetest.Start(t, tg, env, nil, service.New)
	return &app{e}
}
