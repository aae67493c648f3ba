// Command flood creates new counters over the counter port until the
// server refuses one with 0x82 Out of memory, then prints the resident
// memory of the server's process (VmRSS, VmHWM from /proc/PID/status)
// next to the cap it was given. bench/rss.sh runs it against a fresh
// `vkcounter serve` per kind, for issue 20's "RSS within 25 % of the cap".
//
//	go run ./bench/flood -addr 127.0.0.1:11215 -pid PID -kind access -cap BYTES
//
// Kinds (-kind):
//
//	access     Hit on a new name each request
//	visit      Visit a new name (one key) each request
//	visitkeys  Visit one name with a new key each request
//	window     WHit (a day's window) on a new name each request
//	unique     UAdd of 8 keys to a new name each request
//	hold       Acquire 1 of a new resource name (maximum 1) and keep it
//	acquire    Acquire then Release a new resource name: the released
//	           counters are reclaimed at the cap, so nothing is refused;
//	           the run stops after -max requests
//
// Every flood is bounded by -max names and -duration. The memory is read
// when the flood stops and again -settle later, the connection still open
// (the holdings of hold still held).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/loadtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11215", "the counter server (loopback)")
	pid := flag.Int("pid", 0, "the server's process id, whose /proc/PID/status is read")
	kind := flag.String("kind", "access", "access, visit, visitkeys, window, unique, hold or acquire")
	nameLen := flag.Int("len", 64, "bytes of each new name (or key, for visitkeys)")
	most := flag.Int("max", 20_000_000, "stop after this many new names (or keys)")
	settle := flag.Duration("settle", 10*time.Second, "then read the memory again after this long, still connected")
	dur := flag.Duration("duration", 10*time.Minute, "stop after this long")
	depth := flag.Int("depth", 256, "requests per pipelined batch")
	capBytes := flag.Int64("cap", 0, "the store's cap in bytes, for the ratio")
	admin := flag.String("admin", "", "the server's admin address (loopback): its Go heap and soft memory limit are printed too")
	flag.Parse()
	for _, a := range []string{*addr, *admin} {
		if a == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if err == nil {
			err = loadtest.CheckHost(host, false)
		}
		if err != nil {
			fail(2, "flood: %q: want a HOST:PORT on the loopback", a)
		}
	}
	if *pid <= 0 || *capBytes <= 0 {
		fail(2, "flood: -pid and -cap are required")
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, *addr)
	if err != nil {
		fail(1, "flood: %v", err)
	}
	defer c.Close()

	name := func(i int) string { // a distinct name of nameLen bytes
		s := strconv.Itoa(i)
		return strings.Repeat("n", max(*nameLen-len(s), 0)) + s
	}
	keys := make([]string, 8)
	queue := map[string]func(p *client.Pipeline, i int){
		"access":    func(p *client.Pipeline, i int) { p.Hit(name(i)) },
		"visit":     func(p *client.Pipeline, i int) { p.Visit(name(i), "k", 86400) },
		"visitkeys": func(p *client.Pipeline, i int) { p.Visit("room", name(i), 86400) },
		"window":    func(p *client.Pipeline, i int) { p.WindowHit(name(i), 86400) },
		"unique": func(p *client.Pipeline, i int) {
			for k := range keys {
				keys[k] = strconv.Itoa(i*len(keys) + k)
			}
			p.UniqueAdd(name(i), keys)
		},
		"hold":    func(p *client.Pipeline, i int) { p.Acquire(name(i), 1, 1) },
		"acquire": func(p *client.Pipeline, i int) { p.Acquire(name(i), 1, 1); p.Release(name(i), 1) },
	}[*kind]
	if queue == nil {
		fail(2, "flood: -kind %q: want access, visit, visitkeys, window, unique, hold or acquire", *kind)
	}

	start := time.Now()
	deadline := start.Add(*dur)
	ok, refused := 0, 0
	var stop string
	for i := 0; stop == ""; {
		if i >= *most {
			stop = fmt.Sprintf("-max %d names", *most)
			break
		}
		if time.Now().After(deadline) {
			stop = fmt.Sprintf("-duration %v", *dur)
			break
		}
		p := c.Pipeline()
		for n := 0; n < *depth && i < *most; n++ {
			queue(p, i)
			i++
		}
		res, err := p.Exec(ctx)
		if err != nil {
			fail(1, "flood: after %d requests: %v", ok, err)
		}
		for _, r := range res {
			switch err := r.Err(); {
			case err == nil:
				ok++
			case errors.Is(err, wire.StatusOutOfMemory):
				refused++
				if stop == "" && *kind != "acquire" {
					stop = "refused: " + r.Message
				}
			default:
				fail(1, "flood: after %d requests: %v", ok, err)
			}
		}
	}
	secs := time.Since(start).Seconds()
	rss, hwm := status(*pid, "VmRSS:"), status(*pid, "VmHWM:")
	ratio := func(n int64) float64 { return float64(n) / float64(*capBytes) }
	fmt.Printf("%-9s %10d ok %8d refused %6.1f s  VmRSS %5d MiB (%.2f × cap)  VmHWM %5d MiB (%.2f × cap)  cap %d MiB\n",
		*kind, ok, refused, secs, rss>>20, ratio(rss), hwm>>20, ratio(hwm), *capBytes>>20)
	fmt.Printf("          stopped by %s\n", stop)
	time.Sleep(*settle)
	rss = status(*pid, "VmRSS:")
	fmt.Printf("          %v later: VmRSS %d MiB (%.2f × cap)\n", *settle, rss>>20, ratio(rss))
	if *admin != "" {
		g := gauges("http://"+*admin+"/metrics", "go_memstats_heap_alloc_bytes", "go_memstats_next_gc_bytes", "go_gc_gomemlimit_bytes")
		fmt.Printf("          Go heap %d MiB (%.2f × cap), next GC at %d MiB, soft memory limit %d MiB\n",
			g[0]>>20, ratio(g[0]), g[1]>>20, g[2]>>20)
	}
}

// gauges returns the values of the named gauges on a Prometheus page.
func gauges(url string, names ...string) []int64 {
	resp, err := http.Get(url)
	if err != nil {
		fail(1, "flood: %v", err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		fail(1, "flood: %s: %v", url, err)
	}
	vals := make([]int64, len(names))
	for _, line := range strings.Split(string(page), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		for i, n := range names {
			if f[0] == n {
				v, _ := strconv.ParseFloat(f[1], 64)
				vals[i] = int64(v)
			}
		}
	}
	return vals
}

// status returns a size field of /proc/PID/status in bytes.
func status(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fail(1, "flood: %v", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) == 3 && f[0] == field && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	fail(1, "flood: no %s in /proc/%d/status", field, pid)
	return 0
}

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(code)
}
