package service

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/syncbuf"
)

// TestReadyzSeesRedisOutOfMemory takes the bot's Redis (a server of the
// test's own, noeviction) past its maxmemory: the webhook
// answers 503, once logged naming Redis's OOM however many are posted in
// the log's period; /readyz answers 503 naming it, and vkcounter_redis_oom
// is 1. Once Redis has room again, the webhook counts.
func TestReadyzSeesRedisOutOfMemory(t *testing.T) {
	tg := redistest.OwnServer(t, "--maxmemory-policy", "noeviction")
	var log syncbuf.Buffer
	a := startAppLog(t, tg, nil, &log)
	if code, body := get(t, a.AdminURL("/readyz")); code != 200 {
		t.Fatalf("/readyz before: %d %s", code, body)
	}
	a.MustOK(t, event("e0", 1001, 1, "hello"))

	lift := redistest.PastMaxmemory(t, tg.Client)
	for i := range 5 {
		if code, body, _ := a.Post(t, event(fmt.Sprint("e", i+1), 1002+i, 1, fmt.Sprint("text ", i)), nil); code != 503 {
			t.Fatalf("webhook past maxmemory: %d %s, want 503", code, body)
		}
	}
	n := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "callback: request failed") && strings.Contains(line, "OOM command not allowed") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the webhook's failures name Redis's OOM in %d lines for 5 webhooks, want once a period:\n%s", n, log.String())
	}
	code, body := get(t, a.AdminURL("/readyz"))
	if code != 503 || !strings.Contains(body, "out of memory") || !strings.Contains(body, "OOM") {
		t.Errorf("/readyz past maxmemory: %d %s, want 503 naming the OOM", code, body)
	}
	metrics := a.ScrapeMetrics(t)
	for _, want := range []string{"vkcounter_redis_oom 1", "vkcounter_script_oom_errors_total 5"} {
		if !strings.Contains(metrics, "\n"+want+"\n") {
			t.Errorf("no %q in /metrics", want)
		}
	}

	// Room again: the webhook counts at once; /readyz stays 503 for
	// oomWindow after the last refusal (headroom's TestOOMWatch), naming it.
	lift()
	a.MustOK(t, event("e9", 1009, 1, "hello"))
	if code, body := get(t, a.AdminURL("/readyz")); code != 503 || !strings.Contains(body, "counting script was refused") {
		t.Errorf("/readyz right after the refusals: %d %s", code, body)
	}
}

// refuseScripts is a go-redis hook that answers every script call
// (EVAL, EVALSHA), alone or in a pipeline, with the error reply in reply,
// while it is set, without sending it: a managed service's refusal,
// injected.
type refuseScripts struct{ reply atomic.Pointer[string] }

func (h *refuseScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *refuseScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r := h.reply.Load(); r != nil && strings.HasPrefix(cmd.Name(), "eval") {
			cmd.SetErr(replyError(*r))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// replyError is an error reply of Redis, as go-redis gives one (a
// redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func (h *refuseScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r := h.reply.Load()
		if r == nil {
			return next(ctx, cmds)
		}
		var rest []redis.Cmder
		for _, cmd := range cmds {
			if strings.HasPrefix(cmd.Name(), "eval") {
				cmd.SetErr(replyError(*r))
			} else {
				rest = append(rest, cmd)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

// TestReadyzNamesManagedRefusals injects each managed service's refusal of
// a write (Redis's and Dragonfly's out of memory, Upstash's capacity and
// request quota, a read-only replica) into the counting script: the
// webhook answers 503, /readyz answers 503 naming the cause, the metrics
// say which (vkcounter_redis_refusing_writes{cause}), and the script's
// errors are counted as refused, not as Redis failing (the alert
// VkcounterRedisUnreachable reads the latter).
func TestReadyzNamesManagedRefusals(t *testing.T) {
	a := startApp(t, nil, nil)
	hook := &refuseScripts{}
	a.Main.redis.rdb.AddHook(hook)
	// Redis writes again once the test is done, before the service closes
	// (a cleanup registered after startApp's runs first): a shutdown
	// against refused writes waits out its deadline.
	t.Cleanup(func() { hook.reply.Store(nil) })
	for i, c := range []struct{ reply, cause string }{
		{"OOM command not allowed when used memory > 'maxmemory'.", redisconn.CauseOOM},
		{"ERR DB capacity quota exceeded", redisconn.CauseOOM},
		{"ERR Out of memory", redisconn.CauseOOM},
		{"ERR max requests limit exceeded. Limit: 500000, Usage: 500000", redisconn.CauseQuota},
		{"ERR max daily request limit exceeded", redisconn.CauseQuota},
		{"READONLY You can't write against a read only replica.", redisconn.CauseReadOnly},
	} {
		hook.reply.Store(&c.reply)
		if code, body, _ := a.Post(t, event(fmt.Sprint("m", i), 2001+i, 1, "hello"), nil); code != 503 {
			t.Fatalf("%q: webhook answered %d %s, want 503", c.reply, code, body)
		}
		if code, body := get(t, a.AdminURL("/readyz")); code != 503 || !strings.Contains(body, redisconn.WriteRefusals[c.cause]) || !strings.Contains(body, c.reply) {
			t.Errorf("%q: /readyz %d %q, want 503 naming %q and the reply", c.reply, code, body, redisconn.WriteRefusals[c.cause])
		}
		metrics := a.ScrapeMetrics(t)
		for cause := range redisconn.WriteRefusals {
			want := fmt.Sprintf("vkcounter_redis_refusing_writes{cause=%q} %d", cause, map[bool]int{true: 1}[cause == c.cause])
			if !strings.Contains(metrics, "\n"+want+"\n") {
				t.Errorf("%q: no %q in /metrics", c.reply, want)
			}
		}
		for _, want := range []string{fmt.Sprintf(`vkcounter_script_errors_total{cause="redis_refused"} %d`, i+1), `vkcounter_script_errors_total{cause="redis"} 0`} {
			if !strings.Contains(metrics, "\n"+want+"\n") {
				t.Errorf("%q: no %q in /metrics", c.reply, want)
			}
		}
	}
}
