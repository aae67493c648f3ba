package access_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestRedisKeys pins the key layout: one string per counter, named
// prefix + "a:{" + name + "}", without expiry, and the name index, a
// sorted set prefix + "a:index" of the names with score 0.
func TestRedisKeys(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := cleanPrefix(t, tg)
		s := newRedis(t, tg.Client, prefix)
		hit(t, s, "vk.messages")
		hit(t, s, "vk.messages")
		hit(t, s, "a}b")

		got := redistest.Keys(t, tg.Client, prefix)
		slices.Sort(got)
		want := []string{prefix + "a:index", prefix + "a:{a}b}", prefix + "a:{vk.messages}"}
		if !slices.Equal(got, want) {
			t.Fatalf("keys = %q, want %q", got, want)
		}
		if names, err := tg.Client.ZRangeByLex(ctx, prefix+"a:index", &redis.ZRangeBy{Min: "-", Max: "+"}).Result(); err != nil || !slices.Equal(names, []string{"a}b", "vk.messages"}) {
			t.Fatalf("index = %q, %v", names, err)
		}
		if v, err := tg.Client.Get(ctx, prefix+"a:{vk.messages}").Result(); err != nil || v != "2" {
			t.Fatalf("GET = %q, %v; want 2", v, err)
		}
		if ttl, err := tg.Client.TTL(ctx, prefix+"a:{vk.messages}").Result(); err != nil || ttl != -1 {
			t.Fatalf("TTL = %v, %v; want no expiry", ttl, err)
		}
	})
}

// TestRedisForeignValue checks that a key holding something other than
// an integer is reported as an error, not as a missing counter, and is
// left alone.
func TestRedisForeignValue(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		prefix := cleanPrefix(t, tg)
		s := newRedis(t, tg.Client, prefix)
		key := prefix + "a:{page}"
		if err := tg.Client.Set(ctx, key, "not a number", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Total(ctx, "page"); err == nil {
			t.Fatalf("Total = %d, want an error", n)
		}
		if n, err := access.Hit(ctx, s, "page"); err == nil {
			t.Fatalf("Hit = %d, want an error", n)
		}
		if n, err := s.Add(ctx, "page", 5); err == nil || errors.Is(err, access.ErrOverflow) {
			t.Fatalf("Add = %d, %v; want an error other than ErrOverflow", n, err)
		}
		if v, _ := tg.Client.Get(ctx, key).Result(); v != "not a number" {
			t.Fatalf("value changed to %q", v)
		}
	})
}

// TestRedisNil: a nil client is an error, as for every other store.
func TestRedisNil(t *testing.T) {
	if _, err := access.NewRedis(nil, "p:"); err == nil {
		t.Fatal("NewRedis(nil) succeeded")
	}
}
