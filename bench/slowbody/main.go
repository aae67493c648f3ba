// Command slowbody is the slow-body attack on the webhook (issue 37): it
// opens -conns connections that each post to the webhook declaring a body
// of -declared bytes and send 10 of them, keeps them open, and prints the
// server's resident memory (VmRSS from /proc/PID/status) before and after,
// per connection, and how long a normal webhook posted meanwhile took.
// bench/slowbody.sh runs it against this tree and a reference build.
//
//	go run ./bench/slowbody -addr 127.0.0.1:8080 -pid PID -conns 400
//
// The target must be a loopback address; the run is bounded by -conns and
// -hold.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the public HTTP server (loopback)")
	path := flag.String("path", "/callback", "the webhook's path")
	pid := flag.Int("pid", 0, "the server's process id, whose /proc/PID/status is read")
	conns := flag.Int("conns", 400, "slow connections")
	declared := flag.Int("declared", 1<<20, "Content-Length each declares")
	hold := flag.Duration("hold", 2*time.Second, "how long the connections are held before memory is read")
	group := flag.Int("group", 1, "group_id of the normal webhook")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		fail(fmt.Errorf("-addr %q: a loopback address only", *addr))
	}
	before := rss(*pid)
	open := make([]net.Conn, 0, *conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range *conns {
		c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
		if err != nil {
			fail(err)
		}
		open = append(open, c)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"type\":\"m", *path, *declared)
	}
	time.Sleep(*hold) // the attack holds its connections open; nothing is timed by it
	after := rss(*pid)
	body := fmt.Sprintf(`{"type":"message_new","group_id":%d,"event_id":"slowbody%d","object":{"message":{"id":1,"peer_id":1000,"from_id":1000,"text":"meanwhile","conversation_message_id":%d}}}`,
		*group, time.Now().UnixNano(), time.Now().Unix())
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post("http://"+*addr+*path, "application/json", bytes.NewReader([]byte(body)))
	took := time.Since(start)
	status := "error: "
	if err != nil {
		status += err.Error()
	} else {
		resp.Body.Close()
		status = resp.Status
	}
	fmt.Printf("%d connections declaring %d bytes, 10 sent, held %v: VmRSS %d → %d KiB (+%.1f MiB, %.1f KiB per connection); a webhook meanwhile: %s in %v\n",
		*conns, *declared, *hold, before, after, float64(after-before)/1024, float64(after-before)/float64(*conns), status, took.Round(time.Millisecond))
}

// rss is VmRSS of pid in KiB.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		fail(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	fail(fmt.Errorf("no VmRSS for %d", pid))
	return 0
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "slowbody:", err)
	os.Exit(1)
}
