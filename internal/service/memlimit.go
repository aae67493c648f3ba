package service

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/internal/config"
)

// memoryBase is what the soft memory limit allows the program besides the
// counter stores kept in this process: buffers of the counter connections
// and HTTP requests, the bot's queues, the runtime itself.
const memoryBase = 256 << 20

// memoryLimit returns the soft memory limit for the Go runtime that keeps
// the process's resident memory near what the in-memory caps allow: the
// caps count live memory, and without a limit the garbage collector lets
// the heap grow to twice what is live, so stores at their caps could take
// twice the caps of RAM. It is the sum of the caps of the stores kept in
// this process (RESOURCE_MAX_MEMORY with RESOURCE_STORE=memory,
// COUNTERS_MEMORY_MAX_BYTES for each kind counters.MemoryKinds keeps in
// memory) plus memoryBase.
// embedded says the counters' Redis is the embedded one (its unique
// counters are then kept in this process).
func memoryLimit(c *config.Config, embedded bool) int64 {
	limit := int64(memoryBase)
	if c.ResourceStore == counters.StoreMemory {
		limit += c.ResourceMaxMemory
	}
	kinds := int64(len(counters.MemoryKinds(c.CountersStore, embedded)))
	return limit + kinds*c.CountersMemoryMaxBytes
}

// liveHeadroom is the least the soft memory limit leaves above the live
// heap; above 4 times it, a quarter of the live heap is left instead.
const liveHeadroom = 64 << 20

// followLimit returns the soft memory limit for a live heap of live bytes:
// a quarter more than live (at least liveHeadroom more), at most ceiling.
// The collector lets garbage grow as large as the live heap (GOGC=100); a
// limit a quarter above it keeps the resident memory of full stores within
// about 25 % of what they hold, while a small heap keeps GOGC's pace.
func followLimit(live, ceiling int64) int64 {
	return min(ceiling, live+max(liveHeadroom, live/4))
}

// gcFloor is the least garbage the collector lets build up between two
// collections (gcPercent): under load the webhook allocates about 80 MB a
// second over a live heap of a few MiB, which GOGC=100 alone collected 20
// times a second, the collector taking an eighth of the service's CPU.
// It is half of liveHeadroom, so the soft memory limit stays above the
// heap's goal.
const gcFloor = liveHeadroom / 2

// gcPercent returns the GOGC for a live heap of live bytes: 100, or more
// below gcFloor, so that the heap's goal is at least live + gcFloor. 100
// when live is not known (0).
func gcPercent(live int64) int {
	if live <= 0 {
		return 100
	}
	return int(max(100, gcFloor*100/live))
}

// setMemoryLimit sets the Go runtime's soft memory limit unless GOMEMLIMIT
// is set (the runtime has applied that one): every second it follows the
// live heap (followLimit), never above memoryLimit, until Close; and,
// unless GOGC is set, GOGC with it (gcPercent). It
// warns when the caps add up to more than the machine or container has:
// the process could then be killed before a cap refuses anything.
func (m *Main) setMemoryLimit() {
	limit := memoryLimit(&m.cfg, m.countersEmbedded())
	if os.Getenv("GOMEMLIMIT") != "" {
		limit = debug.SetMemoryLimit(-1)
	} else {
		debug.SetMemoryLimit(limit)
		gogc := os.Getenv("GOGC") == ""
		m.workers.start(func(ctx context.Context) { followLiveHeap(ctx, limit, gogc, time.Second) })
	}
	if have := machineMemory(os.ReadFile); have > 0 && limit > have {
		m.log.Warn().Int64("caps_bytes", limit).Int64("memory_bytes", have).Msg("the in-memory counter caps (RESOURCE_MAX_MEMORY, COUNTERS_MEMORY_MAX_BYTES per kind, plus 256 MiB for the rest) add up to more memory than this machine or container has: the process can be killed before a cap refuses a name; lower them")
	}
}

// followLiveHeap sets the soft memory limit from the live heap the last
// collection found, and with gogc GOGC (gcPercent), every period, until
// ctx ends.
func followLiveHeap(ctx context.Context, ceiling int64, gogc bool, period time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(period)
	defer t.Stop()
	percent := 100 // the runtime's, GOGC unset
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live := int64(sample[0].Value.Uint64())
			debug.SetMemoryLimit(followLimit(live, ceiling))
			if p := gcPercent(live); gogc && p != percent {
				debug.SetGCPercent(p)
				percent = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// machineMemory returns the memory this process may use: the container's
// limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes) or the
// machine's MemTotal, whichever is smaller; 0 when neither can be read.
func machineMemory(readFile func(string) ([]byte, error)) int64 {
	var have int64
	if b, err := readFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					have = kb << 10
				}
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := readFile(p)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) means no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (have == 0 || n < have) {
			have = n
		}
	}
	return have
}
