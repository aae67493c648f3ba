package freq

import (
	"context"
	"fmt"
	"time"
)

// Seen returns how many occurrences of identity are inside the window now,
// by Redis's clock: the previous that the next Count of identity would
// answer, were it run at the same second. A text never seen, or seen only
// before the window, answers 0. It writes nothing: its script reads the
// text's key and Redis's clock only (seen.lua). (EVALSHA_RO is not
// used: Redis 6.2 lacks it, and the embedded Redis refuses TIME there.)
func (s *Store) Seen(ctx context.Context, identity string) (int64, error) {
	return s.seen(ctx, identity, "")
}

// seenAt is Seen with an explicit clock (at truncated to the second).
func (s *Store) seenAt(ctx context.Context, identity string, at time.Time) (int64, error) {
	u, err := unixArg(at)
	if err != nil {
		return 0, err
	}
	return s.seen(ctx, identity, u)
}

// seen runs the script; at is a unix second or "" for Redis TIME.
func (s *Store) seen(ctx context.Context, identity, at string) (int64, error) {
	k := s.keys(identity, "")
	n, err := seenScript.Run(ctx, s.rdb, k.names[:1], s.windowArg, at).Int64()
	if err != nil {
		return 0, fmt.Errorf("freq: seen: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("freq: unexpected seen reply %d", n)
	}
	return n, nil
}
