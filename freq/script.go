package freq

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A Store's scripts are runlist's count.lua (the functions of the former
// list-and-total layout, which they read and convert texts from), text.lua
// (the functions of the compact layout), and a main part.
var (
	//go:embed text.lua
	textLib string
	//go:embed textcount.lua
	textMain string
	//go:embed layout.lua
	layoutLua string
)

// The scripts are run with EVALSHA, falling back to EVAL when Redis's
// script cache does not hold them (after a restart or SCRIPT FLUSH).
var (
	textScript   = NewScript(textMain)
	layoutScript = redis.NewScript(layoutLua)
)

// parseReply decodes the script's reply {previous, duplicate, time}.
func parseReply(v any) (result, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 3 {
		return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	var n [3]int64
	for i, x := range vals {
		if n[i], ok = x.(int64); !ok {
			return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
		}
	}
	if n[0] < 0 || n[1] < 0 || n[1] > 1 {
		return result{}, fmt.Errorf("freq: unexpected script reply %#v", v)
	}
	return result{Previous: n[0], Duplicate: n[1] == 1, Time: n[2]}, nil
}
