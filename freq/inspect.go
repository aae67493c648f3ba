package freq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// KeyPattern returns the glob (for SCAN MATCH or KEYS) that matches every
// text key of the Stores under the base prefix (Options.Prefix; empty
// means DefaultPrefix), and no other key of theirs: the keys of the texts
// seen more than once in the window (a text seen once is a field of its
// bucket, text.lua). A prefix holding glob characters (*?[\) matches more.
func KeyPattern(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + keyPart + "{???}" + strings.Repeat("?", textHashBytes)
}

// Held returns how many occurrences the text key (one KeyPattern matches)
// holds, those that left the window but were not dropped yet included: 0
// for a missing key (the text is in its bucket, or nowhere). It is for tools and tests that look at Redis from
// outside.
func Held(ctx context.Context, rdb redis.Cmdable, key string) (int64, error) {
	typ, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("freq: %w", err)
	}
	switch typ {
	case "none":
		return 0, nil
	case "list":
		n, err := rdb.LIndex(ctx, key, 0).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("freq: %w", err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("freq: %s is a %s, not a text key", key, typ)
}
