//go:build unix

package counters_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// The benchmarks measure the server as a separate process, as a real
// deployment runs it next to its clients: the test binary re-executes
// itself with envBenchServer set, and that child only serves a loopback
// port. Its CPU time is read from the child itself (getrusage), so the
// load generator's CPU is not counted in the server's.
const envBenchServer = "VKCOUNTER_COUNTERS_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envBenchServer) == "1" {
		os.Exit(runBenchServer())
	}
	code := redistest.Main(m)
	benchSrv.stop()
	os.Exit(code)
}

// runBenchServer is the child: it serves one port with in-memory stores
// and, when redistest.EnvRedis names a Redis, a second one with Redis
// stores; it prints both addresses ("-" for a missing one) on one line,
// then answers each "cpu" line on stdin with its CPU time in nanoseconds,
// and exits when stdin closes, deleting its Redis keys.
func runBenchServer() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	memAddr, closeMem, err := serveBench(counters.MemoryStores(nil))
	if err != nil {
		return fail(err)
	}
	defer closeMem()
	redisAddr := "-"
	if u := os.Getenv(redistest.EnvRedis); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return fail(err)
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		prefix := fmt.Sprintf("test:bench-%d:", os.Getpid())
		defer deleteBenchKeys(rdb, prefix)
		stores := counters.MemoryStores(nil)
		a, err := access.NewRedis(rdb, prefix)
		if err != nil {
			return fail(err)
		}
		p, err := participant.NewRedis(rdb, prefix)
		if err != nil {
			return fail(err)
		}
		stores.Access, stores.Participants = a, p
		addr, closeRedis, err := serveBench(stores)
		if err != nil {
			return fail(err)
		}
		defer closeRedis()
		redisAddr = addr
	}
	fmt.Println(memAddr, redisAddr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(cpuTime().Nanoseconds())
	}
	return 0
}

// serveBench serves a server with stores on a loopback port.
func serveBench(stores counters.Stores) (addr string, stop func(), err error) {
	s, err := counters.NewServer(counters.ServerOptions{Stores: stores})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return "", nil, err
	}
	go s.Serve(ln)
	return ln.Addr().String(), func() { s.Close() }, nil
}

// deleteBenchKeys deletes the benchmark's keys one by one; the access
// counters would never expire.
func deleteBenchKeys(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	it := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		rdb.Del(ctx, it.Val())
	}
}

// cpuTime returns the user plus system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchServer is the child server process, shared by all benchmarks.
type benchServer struct {
	once sync.Once
	err  error
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	// addr serves in-memory stores; redisAddr, when not "-", Redis ones.
	addr, redisAddr string
}

var benchSrv benchServer

func (s *benchServer) start() error {
	s.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			s.err = err
			return
		}
		s.cmd = exec.Command(exe, "-test.run=^$")
		s.cmd.Env = append(os.Environ(), envBenchServer+"=1")
		s.cmd.Stderr = os.Stderr
		if s.in, err = s.cmd.StdinPipe(); err != nil {
			s.err = err
			return
		}
		stdout, err := s.cmd.StdoutPipe()
		if err != nil {
			s.err = err
			return
		}
		if s.err = s.cmd.Start(); s.err != nil {
			return
		}
		s.out = bufio.NewScanner(stdout)
		if !s.out.Scan() {
			s.err = fmt.Errorf("bench server printed no address: %v", s.out.Err())
			return
		}
		if _, err := fmt.Sscan(s.out.Text(), &s.addr, &s.redisAddr); err != nil {
			s.err = fmt.Errorf("bench server printed %q: %v", s.out.Text(), err)
		}
	})
	return s.err
}

// cpu returns the server process's CPU time so far.
func (s *benchServer) cpu() (time.Duration, error) {
	if _, err := io.WriteString(s.in, "cpu\n"); err != nil {
		return 0, err
	}
	if !s.out.Scan() {
		return 0, fmt.Errorf("bench server: %v", s.out.Err())
	}
	ns, err := strconv.ParseInt(s.out.Text(), 10, 64)
	return time.Duration(ns), err
}

func (s *benchServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.in.Close()
		s.cmd.Wait()
	}
}

// benchNames are the counters the acquire/release benchmarks use.
var benchNames = func() []string {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%04d", i)
	}
	return names
}()

// A workload is what benchmarkServer sends.
type workload int

const (
	// noops are Noop requests.
	noops workload = iota
	// acquireRelease are Acquire+Release pairs on the 1000 benchNames.
	acquireRelease
	// hits are Hits on the 1000 benchNames.
	hits
	// visits are Visits of the 1000 benchNames as keys of one participant
	// counter, with the default timeout.
	visits
)

// benchmarkServer drives b.N requests of workload w to the server at addr
// over conns connections, each keeping depth requests in flight (sent in
// one write, then all answers read); every request is counted. It reports
// requests/s, latency percentiles, and the CPU seconds per million
// requests of the server process and of the load generator.
func benchmarkServer(b *testing.B, addr string, conns, depth int, w workload) {
	clients := make([]*client.Client, conns)
	for i := range clients {
		clients[i] = dialClient(b, addr)
	}
	step := depth // requests per Exec
	if w == acquireRelease && step%2 == 1 {
		step++ // depth 1: an Acquire, then its Release in the next Exec
	}
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	lats := make([][]time.Duration, conns)
	var failed atomic.Value

	srvBefore, err := benchSrv.cpu()
	if err != nil {
		b.Fatal(err)
	}
	cliBefore := cpuTime()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := c.Pipeline()
			next := i * len(benchNames) / conns
			for remaining.Add(-int64(step)) > -int64(step) {
				for k := 0; k < step; {
					name := benchNames[next%len(benchNames)]
					next++
					switch w {
					case noops:
						p.Noop()
						k++
						continue
					case hits:
						p.Hit(name)
						k++
						continue
					case visits:
						p.Visit("bench-room", name, 0)
						k++
						continue
					}
					p.Acquire(name, 1, 0xFFFFFFFF)
					if depth == 1 {
						if err := execBench(p, &lats[i]); err != nil {
							failed.Store(err)
							return
						}
					}
					p.Release(name, 1)
					k += 2
				}
				if err := execBench(p, &lats[i]); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cliCPU := cpuTime() - cliBefore
	srvAfter, err := benchSrv.cpu()
	if err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}

	all := slices.Concat(lats...)
	slices.Sort(all)
	n := float64(len(all))
	pct := func(p float64) float64 { return float64(all[int(p*(n-1))]) / float64(time.Millisecond) }
	b.ReportMetric(n/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric((srvAfter-srvBefore).Seconds()/n*1e6, "srv-cpu-s/Mreq")
	b.ReportMetric(cliCPU.Seconds()/n*1e6, "load-cpu-s/Mreq")
	b.ReportMetric((srvAfter-srvBefore).Seconds()/elapsed.Seconds(), "srv-cores")
}

// benchAddr starts the child server and returns the address serving store
// ("memory" or "redis"), skipping when there is no Redis.
func benchAddr(b *testing.B, store string) string {
	b.Helper()
	if err := benchSrv.start(); err != nil {
		b.Fatal(err)
	}
	if store == "memory" {
		return benchSrv.addr
	}
	if benchSrv.redisAddr == "-" {
		b.Skipf("%s not set: no Redis-backed server", redistest.EnvRedis)
	}
	return benchSrv.redisAddr
}

// execBench runs the pipeline, requires every answer to be a success and
// records the latencies.
func execBench(p *client.Pipeline, lats *[]time.Duration) error {
	res, err := p.Exec(context.Background())
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Status != wire.StatusOK {
			return fmt.Errorf("%s answered %v", r.Op, r.Err())
		}
		*lats = append(*lats, r.Latency)
	}
	return nil
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, tc := range []struct{ conns, depth int }{{1, 1}, {50, 1}, {4, 32}} {
		b.Run(fmt.Sprintf("conns=%d/depth=%d", tc.conns, tc.depth), func(b *testing.B) {
			benchmarkServer(b, benchAddr(b, "memory"), tc.conns, tc.depth, acquireRelease)
		})
	}
}

func BenchmarkNoop(b *testing.B) {
	b.Run("conns=4/depth=32", func(b *testing.B) { benchmarkServer(b, benchAddr(b, "memory"), 4, 32, noops) })
}

// BenchmarkHit and BenchmarkVisit measure the extension opcodes over the
// port, with the in-memory stores and with the Redis stores on the Redis
// of redistest.EnvRedis.
func BenchmarkHit(b *testing.B) { benchmarkStores(b, hits) }

func BenchmarkVisit(b *testing.B) { benchmarkStores(b, visits) }

func benchmarkStores(b *testing.B, w workload) {
	for _, store := range []string{"memory", "redis"} {
		for _, tc := range []struct{ conns, depth int }{{1, 1}, {50, 1}, {4, 32}} {
			b.Run(fmt.Sprintf("store=%s/conns=%d/depth=%d", store, tc.conns, tc.depth), func(b *testing.B) {
				benchmarkServer(b, benchAddr(b, store), tc.conns, tc.depth, w)
			})
		}
	}
}

// TestBenchServerChild checks the benchmark harness itself: the child
// serves and reports a growing CPU time.
func TestBenchServerChild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	if err := benchSrv.start(); err != nil {
		t.Fatal(err)
	}
	c := dialClient(t, benchSrv.addr)
	before, err := benchSrv.cpu()
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := c.Noop(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	after, err := benchSrv.cpu()
	if err != nil || after < before {
		t.Fatalf("cpu %v then %v, %v", before, after, err)
	}
	if !strings.Contains(benchSrv.addr, "127.0.0.1:") {
		t.Fatalf("child listens on %s", benchSrv.addr)
	}
	if os.Getenv(redistest.EnvRedis) == "" {
		return
	}
	// The Redis-backed port serves the extension opcodes.
	r := dialClient(t, benchSrv.redisAddr)
	if _, err := r.Hit(ctx(t), "child-check"); err != nil {
		t.Fatalf("Hit on the Redis-backed port: %v", err)
	}
	if _, _, err := r.Visit(ctx(t), "child-check", "k", time.Second); err != nil {
		t.Fatalf("Visit on the Redis-backed port: %v", err)
	}
}
