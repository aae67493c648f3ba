package freq

import (
	"context"
	"time"
)

// Keys returns the keys s uses for identity: the list, the total and, when
// eventID is not empty, the event key.
func (s *Store) Keys(identity, eventID string) []string { return s.keys(identity, eventID) }

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
