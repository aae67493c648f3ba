package freq

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/runlist"
)

// Keys returns the keys s uses for identity: the text's key, the slot's
// two dedupe hashes, the former layout's list and total and, when eventID
// is not empty, the former layout's dedupe key.
func (s *Store) Keys(identity, eventID string) []string {
	k := s.keys(identity, eventID)
	return k.names[:k.n]
}

// Result is the script's whole answer, with the time the occurrence was
// recorded at.
type Result = result

// CountAt is Count with an explicit clock (see countAt).
func (s *Store) CountAt(ctx context.Context, identity, dedupe string, at time.Time) (Result, error) {
	return s.countAt(ctx, identity, dedupe, at)
}

// CountResult is Count answering with the whole Result.
func (s *Store) CountResult(ctx context.Context, identity, dedupe string) (Result, error) {
	return s.count(ctx, identity, dedupe, "")
}

// formerScript counts as the former layout's script did: runlist's
// count.lua, answering a message's dedupe key first.
//
// KEYS: the list, the total and, optionally, the message's dedupe key;
// ARGV: the window and the keys' TTL in seconds, the dedupe key's TTL in
// milliseconds, the unix second to count at ("": Redis's clock).
var formerScript = redis.NewScript(runlist.Lua() + `
local previous, time = seen(KEYS[3])
if previous then return {previous, 1, time} end
return count(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], '')
`)

// CountFormer counts as the former layout did, at at (zero: Redis's
// clock): its list, total and dedupe key (the one the count remembers its
// answer in for the dedupe TTL), written by formerScript. It is how the
// upgrade tests make the keys a running service of the former version
// leaves.
func (s *Store) CountFormer(ctx context.Context, identity, dedupe string, at time.Time, ttl time.Duration) (Result, error) {
	kk := s.keys(identity, dedupe)
	k := kk.names[:kk.n]
	keys := k[3:5]
	if dedupe != "" {
		keys = k[3:6]
	}
	u := ""
	if !at.IsZero() {
		u = strconv.FormatInt(at.Unix(), 10)
	}
	v, err := formerScript.Run(ctx, s.rdb, keys, s.windowArg, s.keyTTLArg, strconv.FormatInt(ttl.Milliseconds(), 10), u).Result()
	if err != nil {
		return result{}, err
	}
	return parseReply(v)
}

// ParseReply decodes a script reply.
var ParseReply = parseReply

// SlotTag is slotTag; Slot is slot.
var (
	SlotTag = slotTag
	Slot    = func(tag string) int { return redisconn.TagSlot([]byte(tag)) }
)

// Slots is the number of Redis Cluster hash slots.
const Slots = slots

// SeenAt is Seen with an explicit clock (see seenAt).
func (s *Store) SeenAt(ctx context.Context, identity string, at time.Time) (int64, error) {
	return s.seenAt(ctx, identity, at)
}
