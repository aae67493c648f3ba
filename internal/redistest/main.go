package redistest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redisconn"
)

// EnvTally, when it names a file, makes Main append one line per package
// to it: the package, then how many real-server and cluster variants ran
// and were skipped (CI prints the totals).
const EnvTally = "VKCOUNTER_TEST_TALLY"

var (
	mainRunning atomic.Bool

	mu       sync.Mutex // guards the fields below
	prefixes []string   // handed out by Prefix in this process
	ran      = map[Kind]int{}
	skipped  = map[Kind]int{}

	sharedOnce sync.Once
	shared     map[Kind]redis.UniversalClient // the configured real servers
)

// Main runs a package's tests and returns the exit code. Every package
// whose tests use this package runs them through it:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Once the tests have ended it checks the real servers: every key under a
// prefix this process's tests got from Prefix must be gone (Prefix's
// cleanup deletes them when the test ends) or carry a TTL; a key without
// one (written after its test ended) fails the run, named. It then says
// how many real-server and cluster variants ran and were skipped, and
// which variable runs the skipped ones, in its output (go test shows a passing package's
// output with -v only) and, without -v, on the terminal too.
func Main(m *testing.M) int {
	mainRunning.Store(true)
	code := m.Run()
	if left := leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "redistest: keys without a TTL left on the shared Redis after the tests ended: %s\n", strings.Join(left, ", "))
		if code == 0 {
			code = 1
		}
	}
	if line := variantsLine(); line != "" {
		report(line, !testing.Verbose() && anySkipped(), os.Stdout, openTTY)
	}
	if err := writeTally(); err != nil {
		fmt.Fprintf(os.Stderr, "redistest: %s: %v\n", EnvTally, err)
		code = 1
	}
	return code
}

// mustRunUnderMain fails t when the package's TestMain does not call Main.
func mustRunUnderMain(t testing.TB) {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatal("redistest: this package's TestMain must run the tests through redistest.Main: func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }")
	}
}

// report writes the line of variants run and skipped where go test
// shows it: in the test binary's output, which go test prints with -v and
// for a failing package. A passing package's output is dropped without
// -v, so Main asks for the line on the terminal too (toTerminal) when
// variants were skipped and -v is not given: a person running go test
// sees it. A run without -v and without a terminal (a CI job) counts the
// variants with EnvTally, or makes a skip a failure with
// VKCOUNTER_TEST_REQUIRE_REAL.
func report(line string, toTerminal bool, stdout io.Writer, tty func() (io.WriteCloser, error)) {
	fmt.Fprintln(stdout, line)
	if !toTerminal {
		return
	}
	if t, err := tty(); err == nil {
		fmt.Fprintln(t, line)
		t.Close()
	}
}

// anySkipped reports whether a variant was skipped.
func anySkipped() bool {
	mu.Lock()
	defer mu.Unlock()
	return skipped[Real]+skipped[Cluster] > 0
}

// openTTY opens the controlling terminal for writing.
func openTTY() (io.WriteCloser, error) { return os.OpenFile("/dev/tty", os.O_WRONLY, 0) }

// countVariant records that a variant of kind k ran or was skipped.
func countVariant(k Kind, run bool) {
	mu.Lock()
	defer mu.Unlock()
	if run {
		ran[k]++
	} else {
		skipped[k]++
	}
}

// sharedClients returns clients of the real servers the environment
// names, opened once per process (a malformed one is left out: Open
// reports it).
func sharedClients() map[Kind]redis.UniversalClient {
	sharedOnce.Do(func() {
		shared = map[Kind]redis.UniversalClient{}
		if u := os.Getenv(EnvRedis); u != "" {
			if c, err := redisconn.Open(redisconn.Config{URL: u}); err == nil {
				shared[Real] = c
			}
		}
		if seeds := os.Getenv(EnvCluster); seeds != "" {
			if c, err := redisconn.Open(redisconn.Config{Cluster: strings.Split(seeds, ",")}); err == nil {
				shared[Cluster] = c
			}
		}
	})
	return shared
}

// eachNode runs fn on every server of c: c itself, or each master of a
// cluster (SCAN and multi-key commands are per node there).
func eachNode(ctx context.Context, c redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return fn(ctx, n) })
	}
	return fn(ctx, c)
}

// scanPrefix returns the keys under prefix (a MATCH pattern) on one node.
func scanPrefix(ctx context.Context, n redis.Cmdable, prefix string) ([]string, error) {
	var out []string
	it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		out = append(out, it.Val())
	}
	return out, it.Err()
}

// deletePrefix deletes every key under prefix on every real server the
// environment names.
func deletePrefix(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range sharedClients() {
		err := eachNode(ctx, c, func(ctx context.Context, n redis.Cmdable) error {
			keys, err := scanPrefix(ctx, n, prefix)
			if err != nil || len(keys) == 0 {
				return err
			}
			// One key per command: a cluster node refuses a DEL of keys
			// of different slots.
			_, err = n.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Unlink(ctx, k)
				}
				return nil
			})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// leftovers lists the keys without a TTL under this process's prefixes on
// the real servers (at most 20, then how many more).
func leftovers() []string {
	mu.Lock()
	ours := make(map[string]bool, len(prefixes))
	for _, p := range prefixes {
		ours[p] = true
	}
	mu.Unlock()
	if len(ours) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex // eachNode visits a cluster's masters concurrently
	var left []string
	for kind, c := range sharedClients() {
		err := eachNode(ctx, c, func(ctx context.Context, n redis.Cmdable) error {
			// One scan of every test key, kept when under a prefix of
			// this process: other packages' tests are still running.
			keys, err := scanPrefix(ctx, n, "test:")
			if err != nil {
				return err
			}
			for _, k := range keys {
				if !ours[prefixOf(k)] {
					continue
				}
				if ttl, err := n.TTL(ctx, k).Result(); err == nil && ttl == -1 {
					mu.Lock()
					left = append(left, fmt.Sprintf("%s (%s)", k, kind))
					mu.Unlock()
				}
			}
			return nil
		})
		if err != nil {
			left = append(left, fmt.Sprintf("cannot check the %s server: %v", kind, err))
		}
	}
	sort.Strings(left)
	if len(left) > 20 {
		left = append(left[:20], fmt.Sprintf("and %d more", len(left)-20))
	}
	return left
}

// prefixOf returns the Prefix a key is under: "test:<hex>:".
func prefixOf(key string) string {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[0] + ":" + parts[1] + ":"
}

// variantsLine says how many real-server and cluster variants ran and
// were skipped, and how to run the skipped ones; "" when the package has
// none.
func variantsLine() string {
	mu.Lock()
	defer mu.Unlock()
	if ran[Real]+ran[Cluster]+skipped[Real]+skipped[Cluster] == 0 {
		return ""
	}
	kind := func(name string, k Kind, env, example string) string {
		line := fmt.Sprintf("%s variants %d ran, %d skipped", name, ran[k], skipped[k])
		if skipped[k] > 0 {
			line += fmt.Sprintf(" (set %s=%s)", env, example)
		}
		return line
	}
	return fmt.Sprintf("%s: %s; %s", packageDir(), kind("real-server", Real, EnvRedis, "redis://127.0.0.1:6379/0"),
		kind("cluster", Cluster, EnvCluster, "host1:port,host2:port,…"))
}

// packageDir is the tested package's directory relative to the module
// root (go test runs the test binary in the package's directory).
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return filepath.Base(wd)
}

// writeTally appends this package's line to the file EnvTally names.
func writeTally() error {
	name := os.Getenv(EnvTally)
	if name == "" {
		return nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	mu.Lock()
	line := fmt.Sprintf("%s %d %d %d %d\n", packageDir(), ran[Real], ran[Cluster], skipped[Real], skipped[Cluster])
	mu.Unlock()
	// One short write with O_APPEND: lines of packages ending together do
	// not interleave.
	_, err = io.WriteString(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
