package redisconn_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// countingLibrary returns the two scripts of a library new to Redis (the
// prefix in its name and shared code): the first counts one run in
// KEYS[1] and answers the count with ARGV[1], through a function of the
// shared code; the second counts one run, then fails with an error of its
// own. Versions (another code of the same name) are other builds'.
func countingLibrary(p string, version ...string) (count, fail *redisconn.Script) {
	s := redisconn.NewLibrary(libraryName(p), "-- "+strings.Join(version, "")+"\nlocal function bump() return redis.call('INCR', KEYS[1]) end\n",
		redisconn.Function{Name: "count", Main: "return {bump(), ARGV[1]}"},
		redisconn.Function{Name: "fail", Main: "bump() return redis.error_reply('ERR failed after a write')"})
	return s[0], s[1]
}

// libraryName is a library's name made of the test's prefix p.
func libraryName(p string) string { return strings.NewReplacer(":", "_").Replace(p) + "counting" }

// libraryLoaded reports whether Redis holds lib.
func libraryLoaded(t *testing.T, c redis.UniversalClient, lib *redisconn.Library) bool {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: lib.Name()}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(libs) == 1
}

// runCounted runs s once in b with key and arg, and checks that the run was
// counted once: the count answered is want.
func runCounted(t *testing.T, b *redisconn.Batcher, s *redisconn.Script, key string, want int64) {
	t.Helper()
	arg := "a"
	v, err := b.Run(context.Background(), s, []string{key}, []any{&arg}).Result()
	if err != nil {
		t.Fatalf("run %d: %v", want, err)
	}
	if got := v.([]any); got[0] != want || got[1] != "a" {
		t.Fatalf("run %d: answered %#v, want [%d a]", want, got, want)
	}
}

// TestBatcherLibrary: a library's scripts run as its functions where Redis
// has them (a single Redis 7), else with EVAL (miniredis, which has none;
// a cluster, where a library would have to be on every master), each run
// once and answering the same; a library Redis lost is loaded again by
// the next call, which runs once; an error a function raises after it
// wrote is its answer, not a reason to run it again.
func TestBatcherLibrary(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		p := redistest.Prefix(t)
		count, fail := countingLibrary(p)
		lib := count.Library()
		b := redisconn.NewBatcher(tg.Client, redisconn.BatchOptions{})
		if err := b.Load(ctx, lib); err != nil {
			t.Fatal(err)
		}
		key := p + "{l}n"
		runCounted(t, b, count, key, 1)
		runCounted(t, b, count, key, 2)
		functions := tg.Kind == redistest.Real
		if b.Functions() != functions {
			t.Fatalf("Functions() = %v on %s, want %v", b.Functions(), tg.Kind, functions)
		}
		if !functions {
			return
		}
		if !libraryLoaded(t, tg.Client, lib) {
			t.Fatal("the library is not in Redis after Load")
		}
		t.Cleanup(func() { tg.Client.FunctionDelete(context.Background(), lib.Name()) })

		// Redis loses the library (FUNCTION FLUSH, a restart without
		// persistence): the next call runs once, and loads it again.
		if err := tg.Client.FunctionDelete(ctx, lib.Name()).Err(); err != nil {
			t.Fatal(err)
		}
		runCounted(t, b, count, key, 3)
		if !libraryLoaded(t, tg.Client, lib) || !b.Functions() {
			t.Fatalf("after a call: library loaded %v, Functions() %v; want both", libraryLoaded(t, tg.Client, lib), b.Functions())
		}
		runCounted(t, b, count, key, 4)

		// The function's own error, after its write: answered, not run
		// again, and functions stay in use.
		arg := "a"
		err := b.Run(ctx, fail, []string{key}, []any{&arg}).Err()
		if err == nil || !strings.Contains(err.Error(), "failed after a write") {
			t.Fatalf("the failing function answered %v", err)
		}
		if n, err := tg.Client.Get(ctx, key).Int64(); err != nil || n != 5 {
			t.Fatalf("after the failing function the count is %d, %v; want 5 (one run)", n, err)
		}
		if !b.Functions() {
			t.Fatal("a function's own error turned functions off")
		}
	})
}

// TestBatcherLibraryRefused: a user who may not run functions (an ACL
// without FCALL, or without FUNCTION LOAD where the library is missing)
// has the library's scripts run with EVAL, each once, from the first call
// on; Load, refused, says so before any call.
func TestBatcherLibraryRefused(t *testing.T) {
	ctx := context.Background()
	addr := redistest.StartServer(t)
	for i, c := range []struct {
		name, rules string
		load        bool // Load first: refused, it says so before any call
	}{
		{"no fcall, Load", "-fcall -function", true},
		{"function load but no fcall, Load", "-fcall", true},
		{"no fcall", "-fcall -function", false},
		{"fcall but no function load", "-function", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := redistest.Prefix(t)
			u := redistest.ACLUser(t, addr, fmt.Sprint("user", i), append([]string{"+@all"}, strings.Fields(c.rules)...)...)
			opts, err := redis.ParseURL(u)
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(opts)
			t.Cleanup(func() { rdb.Close() })

			count, _ := countingLibrary(p)
			b := redisconn.NewBatcher(rdb, redisconn.BatchOptions{})
			if c.load {
				if err := b.Load(ctx, count.Library()); err != nil || b.Functions() {
					t.Fatalf("Load: %v, Functions() %v; want nil, false", err, b.Functions())
				}
			}
			key := p + "{l}n"
			runCounted(t, b, count, key, 1)
			runCounted(t, b, count, key, 2)
			if b.Functions() {
				t.Fatal("Functions() = true for a user refused them")
			}
		})
	}
}

// TestBatcherLibraryLoadPastMaxmemory: a Redis past its maxmemory refuses
// FUNCTION LOAD (a write) for now: Load does not fail (a full Redis is no
// reason to refuse to start), functions stay in use, and once Redis takes
// writes again the first call loads the library and runs once.
func TestBatcherLibraryLoadPastMaxmemory(t *testing.T) {
	ctx := context.Background()
	tg := redistest.OwnServer(t)
	p := redistest.Prefix(t)
	count, _ := countingLibrary(p)
	b := redisconn.NewBatcher(tg.Client, redisconn.BatchOptions{})
	lift := redistest.PastMaxmemory(t, tg.Client)
	if err := b.Load(ctx, count.Library()); err != nil || !b.Functions() {
		t.Fatalf("Load past maxmemory: %v, Functions() %v; want nil, true", err, b.Functions())
	}
	if libraryLoaded(t, tg.Client, count.Library()) {
		t.Fatal("the library was loaded past maxmemory")
	}
	lift()
	key := p + "{l}n"
	runCounted(t, b, count, key, 1)
	if !libraryLoaded(t, tg.Client, count.Library()) || !b.Functions() {
		t.Fatal("the first call did not load the library")
	}
	runCounted(t, b, count, key, 2)
}

// loadedLibraries reports, for each library of scripts, whether Redis holds it.
func loadedLibraries(t *testing.T, c redis.UniversalClient, scripts ...*redisconn.Script) []bool {
	t.Helper()
	loaded := make([]bool, len(scripts))
	for i, s := range scripts {
		loaded[i] = libraryLoaded(t, c, s.Library())
	}
	return loaded
}

// TestBatcherLoadDeletesOtherVersions: Load deletes the other versions of
// its library (another build's code under the same name) and no other
// library, not even one whose name begins with its own, and the libraries
// of builds before libraries had names; an instance of
// the older build, still running, has each call run once and so loads its
// library again, which the newer build's next start deletes again.
func TestBatcherLoadDeletesOtherVersions(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		p := redistest.Prefix(t)
		older, _ := countingLibrary(p, "older")
		newer, _ := countingLibrary(p, "newer")
		longer := redisconn.NewLibrary(libraryName(p)+"_longer", "",
			redisconn.Function{Name: "one", Main: "return 1"})[0]
		for _, s := range []*redisconn.Script{older, newer, longer} {
			t.Cleanup(func() { tg.Client.FunctionDelete(context.Background(), s.Library().Name()) })
		}
		want := func(when string, loaded ...bool) {
			t.Helper()
			if got := loadedLibraries(t, tg.Client, older, newer, longer); fmt.Sprint(got) != fmt.Sprint(loaded) {
				t.Fatalf("%s: the older, the newer and the longer library loaded: %v, want %v", when, got, loaded)
			}
		}

		olderBuild := redisconn.NewBatcher(tg.Client, redisconn.BatchOptions{})
		if err := olderBuild.Load(ctx, older.Library(), longer.Library()); err != nil {
			t.Fatal(err)
		}
		key := p + "{l}n"
		runCounted(t, olderBuild, older, key, 1)
		want("after the older build's start", true, false, true)

		// A library of a build before libraries had names: "vkcounter_" and
		// its SHA-1 alone. (Another package's tests may delete it too.)
		sum := sha1.Sum([]byte(p))
		legacy := "vkcounter_" + hex.EncodeToString(sum[:])
		src := fmt.Sprintf("#!lua name=%s\nredis.register_function('%s_one', function() return 1 end)\n", legacy, legacy)
		if err := tg.Client.FunctionLoad(ctx, src).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Client.FunctionDelete(context.Background(), legacy) })

		newerBuild := redisconn.NewBatcher(tg.Client, redisconn.BatchOptions{})
		if err := newerBuild.Load(ctx, newer.Library()); err != nil {
			t.Fatal(err)
		}
		want("after the newer build's start", false, true, true)
		if libs := tg.Client.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: legacy}).Val(); len(libs) != 0 {
			t.Fatalf("the library named by its SHA-1 alone is left after the newer build's start")
		}
		runCounted(t, newerBuild, newer, key, 2)

		runCounted(t, olderBuild, older, key, 3)
		want("after a call of the older build", true, true, true)
		if !olderBuild.Functions() || !newerBuild.Functions() {
			t.Fatal("a deleted library turned functions off")
		}
		runCounted(t, olderBuild, older, key, 4)

		if err := redisconn.NewBatcher(tg.Client, redisconn.BatchOptions{}).Load(ctx, newer.Library()); err != nil {
			t.Fatal(err)
		}
		want("after the newer build's second start", false, true, true)
		runCounted(t, newerBuild, newer, key, 5)
	}, redistest.Real)
}

// TestBatcherLoadOtherVersionsUndeletable: a user who may not delete
// libraries (an ACL without FUNCTION DELETE) starts all the same, with
// functions on, and the other versions stay.
func TestBatcherLoadOtherVersionsUndeletable(t *testing.T) {
	ctx := context.Background()
	addr := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { admin.Close() })
	opts, err := redis.ParseURL(redistest.ACLUser(t, addr, "nodelete", "+@all", "-function|delete"))
	if err != nil {
		t.Fatal(err)
	}
	user := redis.NewClient(opts)
	t.Cleanup(func() { user.Close() })

	p := redistest.Prefix(t)
	older, _ := countingLibrary(p, "older")
	newer, _ := countingLibrary(p, "newer")
	if err := redisconn.NewBatcher(admin, redisconn.BatchOptions{}).Load(ctx, older.Library()); err != nil {
		t.Fatal(err)
	}
	b := redisconn.NewBatcher(user, redisconn.BatchOptions{})
	if err := b.Load(ctx, newer.Library()); err != nil || !b.Functions() {
		t.Fatalf("Load without FUNCTION DELETE: %v, Functions() %v; want nil, true", err, b.Functions())
	}
	if got := loadedLibraries(t, admin, older, newer); !got[0] || !got[1] {
		t.Fatalf("the older and the newer library loaded: %v, want both", got)
	}
	runCounted(t, b, newer, p+"{l}n", 1)
}

// TestNewLibraryRefusesBadNames: a library's name goes into Redis's names
// of it and its functions, which take letters, digits and underscores.
func TestNewLibraryRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "a-b", "a b", "a:b", "a*"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLibrary(%q) did not panic", name)
				}
			}()
			redisconn.NewLibrary(name, "", redisconn.Function{Name: "one", Main: "return 1"})
		}()
	}
}
