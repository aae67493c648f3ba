package freq

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/runlist"
)

//go:embed textpeek.lua
var textPeekMain string

// seenScript reads a text's count without writing (textpeek.lua).
var seenScript = redis.NewScript(runlist.Lua() + textLib + textPeekMain)

// Seen returns how many occurrences of identity are inside the window now,
// by Redis's clock: the previous that the next Count of identity would
// answer, were it run at the same second. A text never seen, or seen only
// before the window, answers 0. It writes nothing: its script reads the
// text's keys and Redis's clock only, and counts the former layout's keys
// as the next Count would (while it reads them: see Load), without
// converting them. (EVALSHA_RO is not
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
	keys := []string{k.names[0], k.names[3]}
	n, err := seenScript.Run(ctx, s.rdb, keys, s.windowArg, at, s.formerArg()).Int64()
	if err != nil {
		return 0, fmt.Errorf("freq: seen: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("freq: unexpected seen reply %d", n)
	}
	return n, nil
}
