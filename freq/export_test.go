package freq

import (
	"context"
	"time"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Keys returns the keys s uses for identity: the text's key, the slot's
// two dedupe hashes and the text's bucket.
func (s *Store) Keys(identity string) []string {
	k := s.keys(identity, "")
	return k.names[:]
}

// Field returns identity's field in its bucket (text.lua).
func (s *Store) Field(identity string) string {
	k := s.keys(identity, "").names[0]
	return k[len(k)-textHashBytes:]
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
