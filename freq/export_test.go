package freq

import (
	"context"
	"time"
)

// Keys returns the keys s uses for identity: the list, the total and, when
// eventID is not empty, the event key.
func (s *Store) Keys(identity, eventID string) []string { return s.keys(identity, eventID) }

// CountAt is Count with an explicit clock (see countAt).
func (s *Store) CountAt(ctx context.Context, identity, dedupe string, at time.Time) (Result, error) {
	return s.countAt(ctx, identity, dedupe, at)
}

// ParseReply decodes a script reply.
var ParseReply = parseReply
