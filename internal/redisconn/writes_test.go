package redisconn_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// TestWriteWatch: only a server's refusals of writes while it answers are
// remembered (in every wording of WriteRefusals' causes), each counted by
// cause, and only for the window given.
func TestWriteWatch(t *testing.T) {
	var w redisconn.WriteWatch
	if _, _, _, recent := w.Since(time.Now(), time.Minute); recent {
		t.Fatal("recent refusal before any")
	}
	for _, err := range []error{errors.New("OOM command not allowed"), redis.Nil, proto("ERR wrong number of arguments"), errors.New("dial tcp: connection refused")} {
		if cause := w.Observe(err); cause != "" {
			t.Fatalf("%v taken for a refused write (%s)", err, cause)
		}
	}
	for _, c := range []struct{ reply, cause string }{
		{"OOM command not allowed when used memory > 'maxmemory'.", redisconn.CauseOOM},
		{"ERR DB capacity quota exceeded", redisconn.CauseOOM},
		{"ERR max requests limit exceeded. Limit: 500000, Usage: 500000", redisconn.CauseQuota},
		{"READONLY You can't write against a read only replica.", redisconn.CauseReadOnly},
		// Redis 6.2 wraps the refusal of a script's call (its exact reply):
		{"ERR Error running script (call to f_3c9f2a1b0e4d5c6a7b8c9d0e1f2a3b4c5d6e7f80): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'. ", redisconn.CauseOOM},
	} {
		if got := w.Observe(fmt.Errorf("freq: count: %w", proto(c.reply))); got != c.cause {
			t.Fatalf("%q: cause %q, want %q", c.reply, got, c.cause)
		}
		cause, err, _, recent := w.Since(time.Now(), 10*time.Second)
		if !recent || cause != c.cause || err == nil {
			t.Fatalf("after %q: %q %v %v", c.reply, cause, err, recent)
		}
	}
	if w.Total(redisconn.CauseOOM) != 3 || w.Total(redisconn.CauseQuota) != 1 || w.Total(redisconn.CauseReadOnly) != 1 {
		t.Fatalf("totals %d %d %d, want 3 1 1", w.Total(redisconn.CauseOOM), w.Total(redisconn.CauseQuota), w.Total(redisconn.CauseReadOnly))
	}
	if _, _, _, recent := w.Since(time.Now().Add(10*time.Second), 10*time.Second); recent {
		t.Fatal("a refusal 10 s old is still recent")
	}
}
