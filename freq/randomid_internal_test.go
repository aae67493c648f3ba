package freq

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// allocate gives out n random_ids in one run by reply.lua's next_random_id,
// as n replies queued one after another would.
var allocate = redisconn.NewScript(textLib + replyLib + `
local q = {seq = KEYS[1], start = tonumber(ARGV[1])}
local ids = {}
for i = 1, tonumber(ARGV[2]) do ids[i] = next_random_id(q) end
return ids
`)

// TestMillionRandomIDsDistinct: a million random_ids given out to one
// community in a row are distinct and never 0, across 0 and across the end
// of the 32-bit range, by the function the scripts that queue a reply run.
func TestMillionRandomIDsDistinct(t *testing.T) {
	tg := redistest.Open(t, redistest.Real)
	ctx := context.Background()
	key := redistest.Prefix(t) + "seq"
	t.Cleanup(func() { tg.Client.Del(context.Background(), key) })
	run := func(start, n int) []int32 {
		vs, err := allocate.Exec(ctx, tg.Client, []string{key}, []any{start, n}).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int32, len(vs))
		for i, v := range vs {
			if out[i] = int32(v); int64(out[i]) != v {
				t.Fatalf("random_id %d out of the 32-bit range", v)
			}
		}
		return out
	}
	const n = 1_000_000
	ids := run(-n/2, n)
	if ids[0] != -n/2 || ids[n/2] != 1 || ids[n-1] != n/2 {
		t.Fatalf("ids %d … %d … %d, want -500000 … 1 … 500000 (0 skipped)", ids[0], ids[n/2], ids[n-1])
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id == 0 || i > 0 && id == ids[i-1] {
			t.Fatalf("random_id %d given out twice, or 0", id)
		}
	}
	tg.Client.Del(ctx, key)
	if got, want := run(math.MaxInt32-1, 4), []int32{math.MaxInt32 - 1, math.MaxInt32, math.MinInt32, math.MinInt32 + 1}; !slices.Equal(got, want) {
		t.Fatalf("across the end of the range: %v, want %v", got, want)
	}
}
