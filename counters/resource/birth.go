package resource

import (
	"context"
	_ "embed"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// The birth of the store's data (see birth.lua): acquire grants nothing
// from data younger than one lease, so that a Redis that lost its data
// (a restart without persistence, a failover to an empty replica,
// FLUSHALL) cannot grant the units of a holding whose connection its
// instance has not closed yet.
//
// A script may touch only keys of its own cluster slot, and a cluster loses
// data per master, that is per set of slots: so in a cluster each slot has
// a birth key of its own, tagged with a hash tag of that slot. A single
// server loses its data all at once, and has one birth key.

var (
	//go:embed birth.lua
	birthLua    string
	birthScript = redis.NewScript(commonLua + birthLua)
)

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// birthKey returns the birth key of the slot of a counter whose hash tag
// is tag.
func (r *Redis) birthKey(tag string) string {
	if !r.cluster {
		return r.prefix + "b"
	}
	return r.slotBirthKey(redisconn.SlotTag(redisconn.Slot(tag)))
}

// slotBirthKey returns the birth key of the cluster slot whose tag
// (redisconn.SlotTag) is slotTag.
func (r *Redis) slotBirthKey(slotTag string) string { return r.prefix + "b{" + slotTag + "}" }

// backdate is how far in the past a missing birth is written: 0, or a
// lease with RedisOptions.AssumeNoHolders.
func (r *Redis) backdate() int64 {
	if r.assumeNoHolders {
		return r.lease.Milliseconds()
	}
	return 0
}

// bear writes the birth of every slot that has none (one key on a single
// server), so that a new store (a first start, a new prefix) is refused
// for one lease from its first start rather than one lease from the first
// acquire in each slot. It returns how old the youngest birth is, by
// Redis's clock. Births it fails to write are written by the first acquire
// of their slot.
func (r *Redis) bear(ctx context.Context) (time.Duration, error) {
	var keys []string
	if r.cluster {
		keys = make([]string, 0, clusterSlots)
		for slot := range clusterSlots {
			keys = append(keys, r.slotBirthKey(redisconn.SlotTag(slot)))
		}
	} else {
		keys = []string{r.birthKey("")}
	}
	age := time.Duration(math.MaxInt64)
	_, err := redisconn.RunEach(ctx, r.rdb, len(keys), func(i int) (*redis.Script, []string, []any) {
		return birthScript, keys[i : i+1], []any{r.backdate()}
	}, func(_ int, cmd *redis.Cmd) {
		if v, err := cmd.Int64Slice(); err == nil && len(v) == 2 {
			age = min(age, time.Duration(v[1]-v[0])*time.Millisecond)
		}
	})
	return age, err
}
