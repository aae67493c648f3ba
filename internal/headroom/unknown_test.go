package headroom_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// managedClient returns a client of a redis-server of the test's own
// (maxmemory 64 MB), logged in as a user with the rules given.
func managedClient(t *testing.T, rules ...string) *redis.Client {
	t.Helper()
	addr := redistest.StartServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction")
	opt, err := redis.ParseURL(redistest.ACLUser(t, addr, "svc", rules...))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGuardUnknownWithoutInfo: a user without INFO leaves the guard
// unknown, saying why; it refuses nothing, and does not ask again for
// each request.
func TestGuardUnknownWithoutInfo(t *testing.T) {
	g, err := headroom.New(managedClient(t, redistest.ManagedProfile...), headroom.Options{Percent: 20, Every: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if g.Unknown() != nil {
		t.Fatal("unknown before any reading")
	}
	if _, err := g.Read(context.Background()); err == nil {
		t.Fatal("INFO read without the right")
	}
	if err := g.Unknown(); err == nil || !strings.Contains(err.Error(), "INFO memory refused") {
		t.Fatalf("Unknown = %v, want INFO memory refused", err)
	}
	for range 100 {
		if pct := g.Check(1 << 20); pct != 0 {
			t.Fatalf("Check = %d with nothing read, want 0", pct)
		}
	}
	if n := g.ReadErrors(); n != 1 {
		t.Errorf("%d readings failed, want 1: a refused INFO is not asked again per request", n)
	}
}

// fakeInfo is a go-redis hook answering INFO from Go with used_memory,
// maxmemory as set, without sending it: the Go reading of a server whose
// scripts may not read INFO.
type fakeInfo struct{ used, max atomic.Int64 }

func (f *fakeInfo) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *fakeInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f *fakeInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c, ok := cmd.(*redis.StringCmd); ok && cmd.Name() == "info" {
			c.SetVal(fmt.Sprintf("# Memory\r\nused_memory:%d\r\nmaxmemory:%d\r\n", f.used.Load(), f.max.Load()))
			return nil
		}
		return next(ctx, cmd)
	}
}

// TestGuardBlindScripts: where scripts may not read INFO (the Go reading
// works), the guard is unknown, saying so, and decides on its own
// reading: nothing refused until it is past the limit, then new names are
// refused (IfRoom answers redis.Nil) and never does a script fail.
func TestGuardBlindScripts(t *testing.T) {
	c := managedClient(t, "+@all", "-info") // the server refuses INFO everywhere; Go's is faked
	info := &fakeInfo{}
	info.max.Store(1000)
	info.used.Store(600) // past half the limit (800): scripts would check
	c.AddHook(info)
	g, err := headroom.New(c, headroom.Options{Percent: 20, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := g.Read(ctx); err != nil {
		t.Fatal(err)
	}
	pct := g.Check(0)
	if pct != 0 {
		t.Fatalf("Check under the limit with blind scripts = %d, want 0", pct)
	}
	if err := g.Unknown(); err == nil || !strings.Contains(err.Error(), "inside scripts") {
		t.Fatalf("Unknown = %v, want INFO refused inside scripts", err)
	}
	prefix := redistest.Prefix(t)
	if err := headroom.IfRoom(ctx, c, pct, "INCRBY", prefix+"a", 1).Err(); err != nil {
		t.Fatalf("a new name under the limit: %v", err)
	}
	info.used.Store(900)
	if _, err := g.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if pct = g.Check(0); pct != headroom.BlindFull {
		t.Fatalf("Check past the limit with blind scripts = %d, want BlindFull", pct)
	}
	if err := headroom.IfRoom(ctx, c, pct, "INCRBY", prefix+"b", 1).Err(); err != redis.Nil {
		t.Fatalf("a new name past the limit: %v, want redis.Nil (refused)", err)
	}
	if err := headroom.IfRoom(ctx, c, pct, "INCRBY", prefix+"a", 1).Err(); err != nil {
		t.Fatalf("a name that exists past the limit: %v", err)
	}
	// A script handed a percent to check, on a server refusing INFO inside
	// scripts, refuses rather than fails.
	if err := headroom.IfRoom(ctx, c, 20, "INCRBY", prefix+"c", 1).Err(); err != redis.Nil {
		t.Fatalf("a new name with INFO refused in the script: %v, want redis.Nil", err)
	}
}
