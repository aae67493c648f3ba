package freq

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed window.lua
var windowSource string

// windowScript is run with EVALSHA, falling back to EVAL when Redis's script
// cache does not hold it (after a restart or SCRIPT FLUSH).
var windowScript = redis.NewScript(windowSource)

// parseReply decodes the script's reply {previous, duplicate, time}.
func parseReply(v any) (Result, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 3 {
		return Result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	var n [3]int64
	for i, x := range vals {
		if n[i], ok = x.(int64); !ok {
			return Result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
		}
	}
	if n[0] < 0 || n[1] < 0 || n[1] > 1 {
		return Result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	return Result{Previous: n[0], Duplicate: n[1] == 1, Time: n[2]}, nil
}
