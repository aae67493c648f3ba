package redisconn_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestScriptExec: a Script's keys, given to go-redis by pointer, reach
// Redis as the strings (and the right slot of a cluster), as do args given
// by pointer; a script Redis does not hold yet is sent with EVAL.
func TestScriptExec(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		p := redistest.Prefix(t)
		// The prefix in a comment makes the script new to Redis: the first
		// run finds no cached script and falls back to EVAL.
		s := redisconn.NewScript("-- " + p + "\n" +
			"redis.call('SET', KEYS[2], ARGV[1], 'PX', 60000); return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]}")
		keys := []string{p + "{t}a", p + "{t}b"}
		n, text := int64(1234567), "text"
		for run := range 2 {
			v, err := s.Exec(ctx, tg.Client, keys, []any{&n, &text, 7}).Result()
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			want := []any{keys[0], keys[1], "1234567", "text", "7"}
			if !reflect.DeepEqual(v, want) {
				t.Fatalf("run %d: %#v, want %#v", run, v, want)
			}
		}
		if got, err := tg.Client.Get(ctx, keys[1]).Result(); err != nil || got != "1234567" {
			t.Fatalf("GET %s = %q, %v; want 1234567", keys[1], got, err)
		}
	})
}
