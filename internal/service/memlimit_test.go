package service

import (
	"io/fs"
	"testing"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/internal/config"
)

func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name            string
		resource, kinds string
		embedded        bool
		want            int64
	}{
		{"all in memory", counters.StoreMemory, counters.StoreMemory, false, 256*mib + 100*mib + 4*10*mib},
		{"file store", counters.StoreRedis, counters.StoreFile, false, 256*mib + 2*10*mib},
		{"embedded Redis", counters.StoreMemory, counters.StoreRedis, true, 256*mib + 100*mib + 10*mib},
		{"nothing in memory", counters.StoreRedis, counters.StoreRedis, false, 256 * mib},
	} {
		c := &config.Config{ResourceStore: tc.resource, CountersStore: tc.kinds, ResourceMaxMemory: 100 * mib, CountersMemoryMaxBytes: 10 * mib}
		if got := memoryLimit(c, tc.embedded); got != tc.want {
			t.Errorf("%s: memoryLimit = %d MiB, want %d MiB", tc.name, got/mib, tc.want/mib)
		}
	}
}

func TestMachineMemory(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if s, ok := m[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	meminfo := "MemTotal:       2048000 kB\nMemFree:        1000 kB\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"machine only", map[string]string{"/proc/meminfo": meminfo}, 2048000 << 10},
		{"cgroup v2 smaller", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "268435456\n"}, 268435456},
		{"cgroup v2 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 2048000 << 10},
		{"cgroup v1 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 2048000 << 10},
		{"nothing readable", nil, 0},
	} {
		if got := machineMemory(files(tc.files)); got != tc.want {
			t.Errorf("%s: machineMemory = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestFollowLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ live, ceiling, want int64 }{
		{20 * mib, 3000 * mib, 84 * mib},     // a small heap: 64 MiB above it
		{448 * mib, 3000 * mib, 560 * mib},   // a full store: a quarter above it
		{2800 * mib, 3000 * mib, 3000 * mib}, // never above the caps' sum
	} {
		if got := followLimit(tc.live, tc.ceiling); got != tc.want {
			t.Errorf("followLimit(%d MiB, %d MiB) = %d MiB, want %d MiB", tc.live/mib, tc.ceiling/mib, got/mib, tc.want/mib)
		}
	}
}

// TestGCPercent: a small live heap gets a GOGC that leaves gcFloor (32
// MiB) of garbage between collections, below the soft memory limit
// (followLimit: 64 MiB above it); from 32 MiB live on, GOGC=100.
func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live int64
		want int
	}{
		{0, 100},         // not known yet: the runtime's default
		{4 * mib, 800},   // the webhook's few MiB: 32 MiB of garbage
		{16 * mib, 200},  // 32 MiB of garbage
		{32 * mib, 100},  // as much garbage as live
		{448 * mib, 100}, // a full store
	} {
		got := gcPercent(tc.live)
		if got != tc.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tc.live/mib, got, tc.want)
		}
		if goal := tc.live + tc.live*int64(got)/100; got > 100 && goal > followLimit(tc.live, 1<<40) {
			t.Errorf("gcPercent(%d MiB) = %d: the heap's goal %d MiB is above the soft memory limit", tc.live/mib, got, goal/mib)
		}
	}
}
