package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// TestStartFreshPortTaken: a port picked free that another process took
// before redis-server bound it (here another redis-server, which answers
// as the new one would) is not taken for the new server's: startFresh
// starts it on another port, and that one is the new server's own.
func TestStartFreshPortTaken(t *testing.T) {
	needServer(t)
	taken := tcptest.FreeAddr(t)
	other := launch(t, taken) // not startOn's: a process of someone else's
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if !awaitServing(taken, other.Process.Pid) {
		t.Fatalf("the other redis-server did not start on %s", taken)
	}
	picks := []string{taken}
	pick := func(t testing.TB) string {
		if len(picks) > 0 {
			a := picks[0]
			picks = picks[1:]
			return a
		}
		return tcptest.FreeAddr(t)
	}
	addr, cmd := startFresh(t, pick, "--maxmemory", "12345678")
	if addr == taken {
		t.Fatalf("startFresh returned %s, which the first server serves", addr)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	got, err := c.ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Fatalf("the server on %s: maxmemory %v, %v; want the new server's 12345678", addr, got, err)
	}
	if !awaitServing(addr, cmd.Process.Pid) {
		t.Fatalf("the process returned does not serve %s", addr)
	}
}
