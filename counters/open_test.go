package counters_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestOpenStores: each kind opens the stores it says, with the timeout
// given; the embedded Redis keeps the unique counters in memory; an
// unknown kind and a file store without its directory are refused.
func TestOpenStores(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	for _, tc := range []struct {
		o          counters.StoreOptions
		memUniques bool
	}{
		{counters.StoreOptions{Kind: counters.StoreRedis, Redis: tg.Client, Prefix: redistest.Prefix(t)}, false},
		{counters.StoreOptions{Kind: counters.StoreRedis, Redis: tg.Client, Prefix: redistest.Prefix(t), Embedded: true}, true},
		{counters.StoreOptions{Kind: counters.StoreMemory}, true},
		{counters.StoreOptions{Kind: counters.StoreFile, Dir: t.TempDir(), FileLevels: 1}, true},
	} {
		tc.o.Timeout = 3 * time.Second
		s, _, err := counters.OpenStores(tc.o)
		if err != nil {
			t.Fatalf("%+v: %v", tc.o, err)
		}
		_, isMem := s.Uniques.(*unique.Memory)
		if isMem != tc.memUniques || s.Timeout != tc.o.Timeout || s.Access == nil || s.Participants == nil || s.Windows == nil {
			t.Errorf("%s (embedded %v): uniques in memory %v, timeout %v; want %v, %v", tc.o.Kind, tc.o.Embedded, isMem, s.Timeout, tc.memUniques, tc.o.Timeout)
		}
		if _, isFile := s.Access.(*access.File); isFile != (tc.o.Kind == counters.StoreFile) {
			t.Errorf("%s: access store %T", tc.o.Kind, s.Access)
		}
		if got, want := memoryKindsOf(s), counters.MemoryKinds(tc.o.Kind, tc.o.Embedded); !slices.Equal(got, want) {
			t.Errorf("%s (embedded %v): kinds in memory %v, MemoryKinds says %v", tc.o.Kind, tc.o.Embedded, got, want)
		}
	}
	for _, kind := range []string{counters.StoreMemory, counters.StoreFile} {
		s, _, err := counters.OpenStores(counters.StoreOptions{Kind: kind, Dir: t.TempDir(), FileLevels: 1, Memory: memcap.Limits{MaxNames: 1}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := s.Windows.Hit(ctx, "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Windows.Hit(ctx, "b", time.Minute); !errors.Is(err, window.ErrNoMemory) {
			t.Errorf("%s: a second window name past MaxNames 1: %v, want window.ErrNoMemory", kind, err)
		}
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []counters.StoreOptions{{Kind: "disk"}, {Kind: counters.StoreFile, Dir: notDir, FileLevels: 1}} {
		if _, _, err := counters.OpenStores(o); err == nil || !strings.Contains(err.Error(), "COUNTERS_") {
			t.Errorf("%+v: error %v, want one naming the setting", o, err)
		}
	}
}

// memoryKindsOf lists the kinds whose store in s is kept in memory, in
// MemoryKinds's order.
func memoryKindsOf(s counters.Stores) []string {
	var kinds []string
	for _, k := range []struct {
		kind string
		mem  bool
	}{
		{counters.KindAccess, is[*access.Memory](s.Access)},
		{counters.KindParticipant, is[*participant.Memory](s.Participants)},
		{counters.KindWindow, is[*window.Memory](s.Windows)},
		{counters.KindUnique, is[*unique.Memory](s.Uniques)},
	} {
		if k.mem {
			kinds = append(kinds, k.kind)
		}
	}
	return kinds
}

func is[T any](v any) bool { _, ok := v.(T); return ok }

// TestActivityAddsOncePerBatch: the bot's activity adds to a Redis access
// counter once per batch id, however often the batch is retried, and to a
// memory one at each call (its outcome is never unknown); visits and
// unique adds reach their stores.
func TestActivityAddsOncePerBatch(t *testing.T) {
	ctx := context.Background()
	tg := redistest.Open(t, redistest.Mini)
	redisStores, _, err := counters.OpenStores(counters.StoreOptions{Kind: counters.StoreRedis, Redis: tg.Client, Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    counters.Stores
		want int64
	}{{redisStores, 2}, {counters.MemoryStores(nil), 4}} {
		a := tc.s.Activity()
		for range 2 {
			if _, err := a.AddOnce(ctx, "vk.messages", 2, "batch-1"); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := tc.s.Access.Total(ctx, "vk.messages"); err != nil || n != tc.want {
			t.Errorf("%T: total %d, %v; want %d", tc.s.Access, n, err, tc.want)
		}
		if active, added, err := a.VisitMany(ctx, "vk.users", []string{"1", "2"}, time.Minute); err != nil || active != 2 || added != 2 {
			t.Errorf("visit: %d active, %d added, %v", active, added, err)
		}
		if est, err := a.AddUnique(ctx, "vk.users:day", []string{"1", "2", "2"}); err != nil || est != 2 {
			t.Errorf("unique: estimate %d, %v", est, err)
		}
	}
}
