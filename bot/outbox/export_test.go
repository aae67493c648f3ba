package outbox

import (
	"context"
	"fmt"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// ReadUnderWay notes a read of group under way, as Take does around its
// reads, until end is called.
func (o *Outbox) ReadUnderWay(group int) (end func()) {
	_, end = o.community(group).handouts.beginRead()
	return end
}

// OneScript reports whether Record counts and stores in one script run.
func (o *Outbox) OneScript() bool { return o.counts != nil }

// allocate gives out n random_ids in one run, by the functions of the
// scripts that queue a reply: the first as each of them gives out one, the
// others each after the one before it (random_id_after), the last noted in
// the sequence. So a million take a few runs, not a million.
var allocate = redisconn.NewScript(queueLib + `
local q = {seq = KEYS[1], start = ARGV[1]}
local ids = {next_random_id(q)}
for i = 2, tonumber(ARGV[2]) do ids[i] = random_id_after(ids[i - 1]) end
redis.call('SET', q.seq, ids[#ids])
return ids
`)

// AllocateRandomIDs gives out the next n random_ids of group, as n Adds
// or Records would, in one script run; a sequence not begun begins at
// start.
func (o *Outbox) AllocateRandomIDs(ctx context.Context, group, n int, start int32) ([]int32, error) {
	vs, err := allocate.Exec(ctx, o.rdb, []string{o.seqKey(group)}, []any{start, n}).Int64Slice()
	out := make([]int32, len(vs))
	for i, v := range vs {
		out[i] = int32(v)
		if int64(out[i]) != v {
			return nil, fmt.Errorf("random_id %d out of the 32-bit range", v)
		}
	}
	return out, err
}

// SeqKey is the random_id sequence of group.
func (o *Outbox) SeqKey(group int) string { return o.seqKey(group) }
