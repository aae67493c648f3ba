package freq

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// Seen returns how many occurrences of identity are inside the window now,
// by Redis's clock: the previous that the next Count of identity would
// answer, were it run at the same second. A text never seen, or seen only
// before the window, answers 0. It writes nothing: its script reads the
// text's bucket and key and Redis's clock only (seen.lua). (EVALSHA_RO is not
// used: Redis 6.2 lacks it, and the embedded Redis refuses TIME there.)
func (s *Store) Seen(ctx context.Context, identity string) (int64, error) {
	n, err := s.seen(ctx, []string{identity}, "")
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// SeenMany is Seen of each identity, in order, in one round trip: the
// scripts go to Redis in one pipeline (on a cluster, one per node, sent
// at once). It writes nothing.
func (s *Store) SeenMany(ctx context.Context, identities []string) ([]int64, error) {
	return s.seen(ctx, identities, "")
}

// seenAt is Seen with an explicit clock (at truncated to the second).
func (s *Store) seenAt(ctx context.Context, identity string, at time.Time) (int64, error) {
	u, err := unixArg(at)
	if err != nil {
		return 0, err
	}
	n, err := s.seen(ctx, []string{identity}, u)
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// seen runs the script of each identity in one pipeline; at is a unix
// second or "" for Redis TIME.
func (s *Store) seen(ctx context.Context, identities []string, at string) ([]int64, error) {
	out := make([]int64, len(identities))
	var bad error
	_, err := redisconn.RunEach(ctx, s.rdb, len(identities), func(i int) (*redis.Script, []string, []any) {
		k := s.keys(identities[i], "")
		return seenScript, []string{k.names[0], k.names[3]}, []any{s.windowArg, at}
	}, func(i int, cmd *redis.Cmd) {
		n, err := cmd.Int64()
		if err == nil && n < 0 && bad == nil {
			bad = fmt.Errorf("freq: unexpected seen reply %d", n)
		}
		out[i] = n
	})
	if err != nil {
		return nil, fmt.Errorf("freq: seen: %w", err)
	}
	if bad != nil {
		return nil, bad
	}
	return out, nil
}
