package counters

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/internal/headroom"
)

// The store kinds: where OpenStores keeps the counters (COUNTERS_STORE), and
// where the service keeps the resource counters (RESOURCE_STORE: memory or
// redis).
const (
	// StoreRedis keeps them in Redis, shared by every instance using it.
	StoreRedis = "redis"
	// StoreMemory keeps them in this process only.
	StoreMemory = "memory"
	// StoreFile keeps the access and participant counters in a BBS's
	// files, and the window and unique counters in this process.
	StoreFile = "file"
)

// StoreOptions say where OpenStores keeps the counters.
type StoreOptions struct {
	// Kind is StoreRedis, StoreMemory or StoreFile.
	Kind string
	// Redis and Prefix (the base key prefix; each store appends its own
	// part) are the Redis of StoreRedis.
	Redis  redis.UniversalClient
	Prefix string
	// Embedded says Redis is the embedded Redis, whose HyperLogLog is not
	// Redis's (PFCOUNT of several keys adds their counts up, and PFADD may
	// answer 1 for a key already added): the unique counters then stay in
	// this process's memory, which runs Redis's algorithm and lives exactly
	// as long as the embedded Redis.
	Embedded bool
	// Dir holds the files of StoreFile: count/ the access counters (in
	// FileLevels count files each), bbs.cnt the participants.
	Dir        string
	FileLevels int
	// Timeout is Stores.Timeout.
	Timeout time.Duration
	// Memory caps each kind's store kept in this process (zero fields:
	// the defaults).
	Memory memcap.Limits
	// Guard, if not nil, makes the Redis stores refuse new names and
	// growth while the counters' Redis is short of headroom (see
	// internal/headroom).
	Guard *headroom.Guard
	// MaxKeys, if not nil, caps the keys of each participant name.
	MaxKeys *participant.KeyCap
}

// The four kinds of counters OpenStores opens a store for.
const (
	KindAccess      = "access"
	KindParticipant = "participant"
	KindWindow      = "window"
	KindUnique      = "unique"
)

// MemoryKinds returns the kinds of counters OpenStores keeps in this
// process's memory for the store kind (COUNTERS_STORE) and whether the
// Redis is the embedded one: all four for StoreMemory, the window and
// unique counters for StoreFile (the BBS's files have neither), the unique
// counters on the embedded Redis (see StoreOptions.Embedded). Each is
// capped apart by StoreOptions.Memory, which is what the process's memory
// limit adds up; an unknown kind keeps none.
func MemoryKinds(kind string, embedded bool) []string {
	switch kind {
	case StoreMemory:
		return []string{KindAccess, KindParticipant, KindWindow, KindUnique}
	case StoreFile:
		return []string{KindWindow, KindUnique}
	case StoreRedis:
		if embedded {
			return []string{KindUnique}
		}
	}
	return nil
}

// OpenStores returns the stores of o.Kind, served by the counter port and
// the HTTP API, and the bot's activity counters: the same counters, but
// never refused by o.Guard or o.MaxKeys (the bot's few names are not what
// they protect the bot from). A bad kind, or a store that cannot be
// opened, is an error naming the setting.
func OpenStores(o StoreOptions) (Stores, Activity, error) {
	s, err := openStores(o)
	if err != nil || o.Guard == nil && o.MaxKeys == nil {
		return s, s.Activity(), err
	}
	if o.Kind != StoreRedis {
		// One store in this process: the bot's visits share its names,
		// and the cap applies to them too.
		return s, s.Activity(), err
	}
	unguarded := o
	unguarded.Guard, unguarded.MaxKeys = nil, nil
	bots, err := openStores(unguarded)
	bots.Timeout = s.Timeout
	return s, bots.Activity(), err
}

func openStores(o StoreOptions) (Stores, error) {
	var s Stores
	var err error
	switch o.Kind {
	case StoreRedis:
		s, err = redisStores(o)
	case StoreMemory:
		s = MemoryStoresWithin(nil, o.Memory)
	case StoreFile:
		s, err = fileStores(o)
	default:
		err = fmt.Errorf("COUNTERS_STORE %q: unknown", o.Kind)
	}
	if err == nil && o.MaxKeys != nil {
		s.Participants.(interface{ SetMaxKeys(*participant.KeyCap) }).SetMaxKeys(o.MaxKeys)
	}
	s.Timeout = o.Timeout
	return s, err
}

func redisStores(o StoreOptions) (Stores, error) {
	w, err := window.NewRedis(o.Redis, o.Prefix)
	if err != nil {
		return Stores{}, err
	}
	w.SetGuard(o.Guard)
	var u unique.Store = unique.NewMemory(o.Memory)
	if !slices.Contains(MemoryKinds(StoreRedis, o.Embedded), KindUnique) {
		ru, err := unique.NewRedis(o.Redis, o.Prefix)
		if err != nil {
			return Stores{}, err
		}
		ru.SetGuard(o.Guard)
		u = ru
	}
	a, err := access.NewRedis(o.Redis, o.Prefix)
	if err != nil {
		return Stores{}, err
	}
	a.SetGuard(o.Guard)
	p, err := participant.NewRedis(o.Redis, o.Prefix)
	if err != nil {
		return Stores{}, err
	}
	p.SetGuard(o.Guard)
	return Stores{Access: a, Participants: p, Windows: w, Uniques: u}, nil
}

// fileStores opens the BBS's files; the file store has no window or unique
// counters: they stay in this process's memory (see docs/COUNTERS.md).
func fileStores(o StoreOptions) (Stores, error) {
	a, err := access.NewFile(filepath.Join(o.Dir, "count"), o.FileLevels)
	if err != nil {
		return Stores{}, fmt.Errorf("COUNTERS_DIR: %w", err)
	}
	p, err := participant.NewFile(filepath.Join(o.Dir, "bbs.cnt"), nil)
	if err != nil {
		return Stores{}, fmt.Errorf("COUNTERS_DIR: %w", err)
	}
	s := MemoryStoresWithin(nil, o.Memory)
	s.Access, s.Participants = a, p
	return s, nil
}

// Activity feeds the bot's activity counters into the stores: it meets
// bot.Activity (this package does not import the bot).
type Activity struct {
	s Stores
}

// Activity returns the adapter that writes the bot's activity into s.
func (s Stores) Activity() Activity { return Activity{s} }

// AddOnce adds n to the access counter name once per batch where the
// store's outcome can be unknown (Redis, an access.OnceAdder); a store in
// this process knows its outcome, so Add is enough.
func (a Activity) AddOnce(ctx context.Context, name string, n int64, batch string) (int64, error) {
	if once, ok := a.s.Access.(access.OnceAdder); ok {
		return once.AddOnce(ctx, name, n, batch)
	}
	return a.s.Access.Add(ctx, name, n)
}

// VisitMany visits the participant counter name with keys.
func (a Activity) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (active, added int, err error) {
	return a.s.Participants.VisitMany(ctx, name, keys, timeout)
}

// AddUnique adds keys to the unique counter name and reads its estimate;
// with no key, it only reads the estimate.
func (a Activity) AddUnique(ctx context.Context, name string, keys []string) (int64, error) {
	if len(keys) == 0 {
		return a.s.Uniques.Count(ctx, name)
	}
	if _, err := a.s.Uniques.Add(ctx, name, keys); err != nil {
		return 0, err
	}
	return a.s.Uniques.Count(ctx, name)
}
