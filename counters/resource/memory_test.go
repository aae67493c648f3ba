package resource_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/resource"
)

// envMemoryCase names the case TestTableMemoryHelper measures, in its
// subprocess: "name length,hold" (hold 1: the counters stay held).
const envMemoryCase = "VKCOUNTER_RESOURCE_MEMORY_CASE"

// memoryCap is the table's cap in the measurement: small, so that it runs
// in a fraction of a second, and large against the process's own memory.
const memoryCap = 48 << 20

// TestTableMemoryEstimate: a table filled to its cap takes, in the
// process's resident memory once garbage is collected, within 25 % of its
// estimate, for short and long names (up to the longest, 65,535 bytes),
// held or released. Each case runs in a process of its own.
func TestTableMemoryEstimate(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	if raceEnabled {
		t.Skip("the race detector's memory would be measured too")
	}
	for _, c := range []string{"16,1", "16,0", "255,1", "1000,0", "4000,1", "40000,0", fmt.Sprint(resource.MaxNameLen, ",1")} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTableMemoryHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envMemoryCase+"="+c)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("case %s: %v\n%s", c, err, out)
		}
		_, line, ok := bytes.Cut(out, []byte("MEASURED "))
		line, _, _ = bytes.Cut(line, []byte("\n"))
		f := strings.Fields(string(line))
		if !ok || len(f) != 3 {
			t.Fatalf("case %s: no measurement in\n%s", c, out)
		}
		est, _ := strconv.ParseFloat(f[0], 64)
		rss, _ := strconv.ParseFloat(f[1], 64)
		nameLen, hold, _ := strings.Cut(c, ",")
		t.Logf("names of %s bytes, held %s: estimated %.1f MiB, resident %.1f MiB after GC (%.2f), %s counters",
			nameLen, map[string]string{"1": "yes", "0": "no"}[hold], est/(1<<20), rss/(1<<20), rss/est, f[2])
		if est < memoryCap*0.9 || rss < est*0.8 || rss > est*1.25 {
			t.Errorf("case %s: estimated %.0f bytes (cap %d), resident %.0f: want within 25 %%", c, est, memoryCap, rss)
		}
	}
}

// TestTableMemoryHelper fills a table to its cap, in the subprocess of
// TestTableMemoryEstimate, and prints the table's estimate and the growth
// of the resident memory, both after a garbage collection.
func TestTableMemoryHelper(t *testing.T) {
	c := os.Getenv(envMemoryCase)
	if c == "" {
		t.Skip("run by TestTableMemoryEstimate")
	}
	lenStr, holdStr, _ := strings.Cut(c, ",")
	nameLen, _ := strconv.Atoi(lenStr)
	hold := holdStr == "1"
	name := make([]byte, nameLen)
	base := settledRSS(t)
	tab, err := resource.New(resource.Options{MaxMemory: memoryCap, MaxHoldings: math.MaxInt}) // one holder fills the table
	if err != nil {
		t.Fatal(err)
	}
	h := tab.NewHolder()
	n := 0
	for ; ; n++ {
		copy(name, strconv.Itoa(n)+"-")
		err := h.Acquire(name, 1, 1)
		if errors.Is(err, resource.ErrNoMemory) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hold {
			if err := h.Release(name, 1); err != nil {
				t.Fatal(err)
			}
			if tab.Stats().Reclaimed > 0 { // full
				break
			}
		}
	}
	rss := settledRSS(t) - base
	fmt.Printf("MEASURED %d %d %d\n", tab.Stats().UsedMemory, rss, n)
	runtime.KeepAlive(h)
}

// settledRSS returns the resident memory after a garbage collection that
// returned what it freed to the system.
func settledRSS(t *testing.T) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || len(f) < 2 {
		t.Fatalf("statm %q", b)
	}
	return pages * int64(os.Getpagesize())
}
