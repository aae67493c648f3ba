package resource_test

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/resource"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct{ sec atomic.Int64 }

func newFakeClock(sec int64) *fakeClock {
	c := &fakeClock{}
	c.sec.Store(sec)
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(c.sec.Load(), 0) }
func (c *fakeClock) Set(sec int64)           { c.sec.Store(sec) }
func (c *fakeClock) Add(sec int64)           { c.sec.Add(sec) }
func (c *fakeClock) Clock() func() time.Time { return c.Now }

// interval is the statistics interval of the tests, in seconds.
const interval = 60

func newTable(t *testing.T, clock *fakeClock) *resource.Table {
	t.Helper()
	tab, err := resource.New(resource.Options{Buckets: 64, Interval: interval * time.Second, Clock: clock.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func get(t *testing.T, tab *resource.Table, name string) uint32 {
	t.Helper()
	v, err := tab.Get([]byte(name))
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return v
}

func dump(t *testing.T, tab *resource.Table) []resource.Entry {
	t.Helper()
	var es []resource.Entry
	if err := tab.Dump(func(e resource.Entry) error { es = append(es, e); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) || (want == nil && got != nil) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

func TestAcquireUpToAndIncludingMaximum(t *testing.T) {
	tab := newTable(t, newFakeClock(1000*interval))
	h := tab.NewHolder()
	wantErr(t, "first acquire", h.Acquire([]byte("a"), 3, 5), nil)
	if got := get(t, tab, "a"); got != 3 {
		t.Fatalf("a new counter starts at the resources acquired: got %d, want 3", got)
	}
	wantErr(t, "acquire to exactly the maximum", h.Acquire([]byte("a"), 2, 5), nil)
	wantErr(t, "acquire past the maximum", h.Acquire([]byte("a"), 1, 5), resource.ErrNotAvailable)
	if got := get(t, tab, "a"); got != 5 {
		t.Fatalf("a refused acquire changed the consumption to %d", got)
	}
	// The maximum is per request, not stored: a larger one admits more.
	wantErr(t, "acquire with a larger maximum", h.Acquire([]byte("a"), 1, 6), nil)
	if got := h.Held("a"); got != 6 {
		t.Fatalf("Held = %d, want 6", got)
	}
	// A new counter is refused too when resources exceed the maximum.
	wantErr(t, "maximum below resources", h.Acquire([]byte("b"), 2, 1), resource.ErrInvalid)
	if _, err := tab.Get([]byte("b")); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("an invalid acquire created the counter: %v", err)
	}
}

func TestAcquireNeverWraps(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	h := tab.NewHolder()
	wantErr(t, "acquire 2^32-1", h.Acquire([]byte("big"), 0xFFFFFFFF, 0xFFFFFFFF), nil)
	wantErr(t, "acquire one more", h.Acquire([]byte("big"), 1, 0xFFFFFFFF), resource.ErrNotAvailable)
	wantErr(t, "acquire 2^32-1 more", h.Acquire([]byte("big"), 0xFFFFFFFF, 0xFFFFFFFF), resource.ErrNotAvailable)
	if got := get(t, tab, "big"); got != 0xFFFFFFFF {
		t.Fatalf("consumption %d, want 4294967295", got)
	}
	wantErr(t, "release all", h.Release([]byte("big"), 0xFFFFFFFF), nil)
	if got := get(t, tab, "big"); got != 0 {
		t.Fatalf("consumption after release %d, want 0", got)
	}
}

func TestInvalidArguments(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	h := tab.NewHolder()
	long := make([]byte, resource.MaxNameLen+1)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"acquire 0", h.Acquire([]byte("x"), 0, 10)},
		{"acquire empty name", h.Acquire(nil, 1, 10)},
		{"acquire long name", h.Acquire(long, 1, 10)},
		{"release empty name", h.Release(nil, 1)},
		{"release long name", h.Release(long, 1)},
	} {
		wantErr(t, tc.name, tc.err, resource.ErrInvalid)
	}
	if s := tab.Stats(); s.Objects != 0 || s.TotalObjects != 0 {
		t.Fatalf("invalid requests created counters: %+v", s)
	}
}

func TestReleaseRules(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	a, b := tab.NewHolder(), tab.NewHolder()
	name := []byte("jobs")

	wantErr(t, "release of a missing counter", a.Release(name, 1), resource.ErrNotFound)
	wantErr(t, "release 0 of a missing counter", a.Release(name, 0), resource.ErrNotFound)

	wantErr(t, "a acquires 3", a.Acquire(name, 3, 10), nil)
	wantErr(t, "b releases what only a holds", b.Release(name, 1), resource.ErrNotAcquired)
	wantErr(t, "b releases 0 holding nothing", b.Release(name, 0), resource.ErrNotAcquired)
	wantErr(t, "b acquires 1", b.Acquire(name, 1, 10), nil)
	wantErr(t, "b releases more than it holds, though the total is 4", b.Release(name, 2), resource.ErrNotAcquired)
	if got := get(t, tab, "jobs"); got != 4 {
		t.Fatalf("refused releases changed the consumption to %d", got)
	}
	wantErr(t, "a releases 0 while holding", a.Release(name, 0), nil)
	wantErr(t, "a releases 2", a.Release(name, 2), nil)
	if got := get(t, tab, "jobs"); got != 2 {
		t.Fatalf("release must decrease the consumption: got %d, want 2", got)
	}
	wantErr(t, "a releases its last 1", a.Release(name, 1), nil)
	if a.Len() != 0 {
		t.Fatalf("a holding that reached 0 is dropped: Len = %d", a.Len())
	}
	wantErr(t, "a releases 0 after its holding reached 0", a.Release(name, 0), resource.ErrNotAcquired)
	wantErr(t, "b releases its 1", b.Release(name, 1), nil)
	if got := get(t, tab, "jobs"); got != 0 {
		t.Fatalf("consumption %d, want 0", got)
	}
}

func TestReleaseAll(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	a, b := tab.NewHolder(), tab.NewHolder()
	for i, n := range []string{"x", "y", "z"} {
		wantErr(t, "a acquires", a.Acquire([]byte(n), uint32(i+1), 100), nil)
	}
	wantErr(t, "b acquires", b.Acquire([]byte("x"), 7, 100), nil)
	a.ReleaseAll()
	if a.Len() != 0 {
		t.Fatalf("Len after ReleaseAll = %d", a.Len())
	}
	want := map[string]uint32{"x": 7, "y": 0, "z": 0}
	for n, v := range want {
		if got := get(t, tab, n); got != v {
			t.Errorf("%s = %d after ReleaseAll, want %d", n, got, v)
		}
	}
}

func TestMaxConsumptionAcrossBoundaries(t *testing.T) {
	clock := newFakeClock(100*interval + 5)
	tab := newTable(t, clock)
	h := tab.NewHolder()
	name := []byte("m")
	maxOf := func() uint32 {
		t.Helper()
		for _, e := range dump(t, tab) {
			if e.Name == "m" {
				return e.MaxConsumption
			}
		}
		t.Fatal("counter m not listed")
		return 0
	}

	wantErr(t, "acquire 5", h.Acquire(name, 5, 100), nil)
	wantErr(t, "release 4", h.Release(name, 4), nil)
	if got := maxOf(); got != 5 {
		t.Fatalf("max in the first interval = %d, want 5", got)
	}

	// Untouched since the boundary: the max is the current consumption.
	clock.Set(101 * interval)
	if got := maxOf(); got != 1 {
		t.Fatalf("max of an untouched counter after the boundary = %d, want 1", got)
	}
	// The first acquire after a boundary starts the max afresh.
	wantErr(t, "acquire 2", h.Acquire(name, 2, 100), nil)
	wantErr(t, "release 2", h.Release(name, 2), nil)
	if got := maxOf(); got != 3 {
		t.Fatalf("max after acquire in the new interval = %d, want 3", got)
	}

	// The first release after a boundary: the max is the consumption
	// before the release.
	clock.Set(102*interval + 59)
	wantErr(t, "acquire 9 with the clock inside the interval", h.Acquire(name, 9, 100), nil)
	clock.Set(103 * interval)
	wantErr(t, "release 10", h.Release(name, 10), nil)
	if got := maxOf(); got != 10 {
		t.Fatalf("max after the first release in an interval = %d, want 10", got)
	}
	clock.Add(interval)
	if got := maxOf(); got != 0 {
		t.Fatalf("max of an empty untouched counter = %d, want 0", got)
	}
}

func TestGC(t *testing.T) {
	clock := newFakeClock(50 * interval)
	tab := newTable(t, clock)
	h := tab.NewHolder()
	for _, n := range []string{"held", "freed", "touched"} {
		wantErr(t, "acquire "+n, h.Acquire([]byte(n), 1, 10), nil)
	}
	wantErr(t, "release freed", h.Release([]byte("freed"), 1), nil)
	wantErr(t, "release touched", h.Release([]byte("touched"), 1), nil)

	if n := tab.GC(); n != 0 {
		t.Fatalf("GC in the same interval deleted %d counters", n)
	}
	if got := len(dump(t, tab)); got != 3 {
		t.Fatalf("a fully released counter is listed until the next boundary: %d listed, want 3", got)
	}

	clock.Set(51*interval + 1)
	// Touched again in the new interval: kept one more interval.
	wantErr(t, "acquire touched", h.Acquire([]byte("touched"), 1, 10), nil)
	wantErr(t, "release touched", h.Release([]byte("touched"), 1), nil)
	// Get is not a touch.
	if get(t, tab, "freed") != 0 {
		t.Fatal("freed is not 0")
	}
	if n := tab.GC(); n != 1 {
		t.Fatalf("GC after the boundary deleted %d counters, want 1", n)
	}
	es := dump(t, tab)
	if len(es) != 2 || es[0].Name != "held" || es[1].Name != "touched" {
		t.Fatalf("after GC: %+v, want held and touched", es)
	}
	clock.Add(interval)
	tab.GC()
	es = dump(t, tab)
	if len(es) != 1 || es[0].Name != "held" || es[0].Consumption != 1 {
		t.Fatalf("after the second GC: %+v, want only held at 1", es)
	}
	s := tab.Stats()
	if s.GCCount != 3 || s.Objects != 1 || s.TotalObjects != 3 {
		t.Fatalf("stats %+v: want 3 GC runs, 1 object, 3 ever created", s)
	}
	if _, err := tab.Get([]byte("freed")); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("Get of a collected counter: %v", err)
	}
}

// The estimated memory of a counter with a 10-byte name: the name (16 as
// allocated) and the counter (104); with one holding (48).
const (
	holding    = 48
	perCounter = 16 + 104 + holding
)

// TestMaxHoldings: a holder of the in-memory table holds at most
// Options.MaxHoldings names; an acquire of one more is refused with
// ErrNoMemory and changes nothing, while more of a name held, and a name
// once another was released, are granted.
func TestMaxHoldings(t *testing.T) {
	if _, err := resource.New(resource.Options{MaxHoldings: -1}); err == nil {
		t.Fatal("MaxHoldings -1 accepted")
	}
	tab, err := resource.New(resource.Options{MaxHoldings: 3})
	if err != nil {
		t.Fatal(err)
	}
	h := tab.NewHolder()
	for i := range 3 {
		wantErr(t, fmt.Sprint("n", i), h.Acquire([]byte(fmt.Sprint("n", i)), 1, 5), nil)
	}
	if err := h.Acquire([]byte("n3"), 1, 5); !errors.Is(err, resource.ErrNoMemory) {
		t.Fatalf("a fourth name: %v, want ErrNoMemory", err)
	}
	if _, err := tab.Get([]byte("n3")); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("n3 refused, but Get says %v, want ErrNotFound", err)
	}
	wantErr(t, "more of a name held", h.Acquire([]byte("n0"), 1, 5), nil)
	wantErr(t, "another holder", tab.NewHolder().Acquire([]byte("n3"), 1, 5), nil)
	wantErr(t, "release n1", h.Release([]byte("n1"), 1), nil)
	wantErr(t, "n3 once n1 is released", h.Acquire([]byte("n3"), 1, 5), nil)
	if def, _ := resource.New(resource.Options{}); def != nil {
		h := def.NewHolder()
		for i := range resource.DefaultMaxHoldings {
			wantErr(t, "within the default", h.Acquire([]byte(fmt.Sprint("d", i)), 1, 1), nil)
		}
		if err := h.Acquire([]byte("one more"), 1, 1); !errors.Is(err, resource.ErrNoMemory) {
			t.Fatalf("past DefaultMaxHoldings: %v, want ErrNoMemory", err)
		}
	}
}

func TestMaxMemory(t *testing.T) {
	tab, err := resource.New(resource.Options{MaxMemory: 2*perCounter + 20})
	if err != nil {
		t.Fatal(err)
	}
	h := tab.NewHolder()
	wantErr(t, "first counter", h.Acquire([]byte("aaaaaaaaaa"), 1, 1), nil)
	wantErr(t, "second counter", h.Acquire([]byte("bbbbbbbbbb"), 1, 1), nil)
	wantErr(t, "third counter over the cap", h.Acquire([]byte("cccccccccc"), 1, 1), resource.ErrNoMemory)
	wantErr(t, "existing holding still grows", h.Acquire([]byte("aaaaaaaaaa"), 1, 2), nil)
	wantErr(t, "a new holding over the cap", tab.NewHolder().Acquire([]byte("aaaaaaaaaa"), 1, 3), resource.ErrNoMemory)
	s := tab.Stats()
	if s.Objects != 2 || s.UsedMemory != 2*perCounter || s.Reclaimed != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := tab.Get([]byte("cccccccccc")); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("a refused acquire left its counter: %v", err)
	}
	h.ReleaseAll()
	if s := tab.Stats(); s.UsedMemory != 2*(perCounter-holding) {
		t.Fatalf("after releasing the holdings: %+v", s)
	}
}

// TestFullTableReclaimsReleased: when the table is full, the counters at 0
// make room, those released longest ago first; held counters never do.
func TestFullTableReclaimsReleased(t *testing.T) {
	tab, err := resource.New(resource.Options{MaxMemory: 3 * perCounter})
	if err != nil {
		t.Fatal(err)
	}
	h := tab.NewHolder()
	for _, n := range []string{"a-counter1", "b-counter1", "c-counter1"} {
		wantErr(t, "acquire "+n, h.Acquire([]byte(n), 1, 1), nil)
	}
	wantErr(t, "full", tab.NewHolder().Acquire([]byte("d-counter1"), 1, 1), resource.ErrNoMemory)
	wantErr(t, "release b", h.Release([]byte("b-counter1"), 1), nil)
	wantErr(t, "release a", h.Release([]byte("a-counter1"), 1), nil)
	other := tab.NewHolder()
	wantErr(t, "d takes b's room", other.Acquire([]byte("d-counter1"), 1, 1), nil)
	if _, err := tab.Get([]byte("b-counter1")); !errors.Is(err, resource.ErrNotFound) {
		t.Fatalf("b, released first, is still there: %v", err)
	}
	if get(t, tab, "a-counter1") != 0 || get(t, tab, "c-counter1") != 1 {
		t.Fatal("a (released later) or c (held) is gone")
	}
	// a is acquired again, so it is no longer at 0: nothing to reclaim.
	wantErr(t, "a again", h.Acquire([]byte("a-counter1"), 1, 1), nil)
	wantErr(t, "full of held counters", other.Acquire([]byte("e-counter1"), 1, 1), resource.ErrNoMemory)
	if s := tab.Stats(); s.Reclaimed != 1 || s.Objects != 3 || s.UsedMemory != 3*perCounter {
		t.Fatalf("stats %+v", s)
	}
	wantErr(t, "release d", other.Release([]byte("d-counter1"), 1), nil)
	h.ReleaseAll()
	if s := tab.Stats(); s.UsedMemory != 3*(perCounter-holding) {
		t.Fatalf("all released: %+v", s)
	}
}

// TestReleasedNamesCannotLockOthersOut: a client acquiring and releasing
// names of 64 KiB, many times what the table holds, is never refused, and
// neither is another client's new short name, during and after.
func TestReleasedNamesCannotLockOthersOut(t *testing.T) {
	const maxMem = 4 << 20 // about 60 such names
	// One holder holds the 2,000 short names.
	tab, err := resource.New(resource.Options{MaxMemory: maxMem, MaxHoldings: 2000})
	if err != nil {
		t.Fatal(err)
	}
	name := make([]byte, resource.MaxNameLen)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		h := tab.NewHolder()
		for i := range 600 {
			copy(name, fmt.Sprintf("%08d", i))
			if err := h.Acquire(name, 1, 1); err != nil {
				errs <- fmt.Errorf("long name %d: %w", i, err)
				return
			}
			if err := h.Release(name, 1); err != nil {
				errs <- fmt.Errorf("release long name %d: %w", i, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		h := tab.NewHolder()
		for i := range 2000 {
			if err := h.Acquire([]byte(fmt.Sprintf("short%d", i)), 1, 1); err != nil {
				errs <- fmt.Errorf("short name %d: %w", i, err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := tab.Stats()
	if s.UsedMemory > maxMem || s.Reclaimed < 500 {
		t.Fatalf("stats %+v: want within %d, most long names reclaimed", s, maxMem)
	}
	wantErr(t, "another client's new name at the end", tab.NewHolder().Acquire([]byte("late"), 1, 1), nil)
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts resource.Options
	}{
		{"negative buckets", resource.Options{Buckets: -1}},
		{"interval under 10 s", resource.Options{Interval: 9 * time.Second}},
		{"fractional interval", resource.Options{Interval: 10500 * time.Millisecond}},
		{"negative memory", resource.Options{MaxMemory: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := resource.New(tc.opts); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	tab, err := resource.New(resource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tab.Interval() != resource.DefaultInterval {
		t.Fatalf("default interval %v", tab.Interval())
	}
	// The default interval is aligned on midnight UTC.
	now := time.Date(2024, 3, 1, 13, 14, 15, 0, time.UTC)
	if got, want := tab.NextBoundary(now), time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("NextBoundary = %v, want %v", got, want)
	}
}

func TestDumpStopsAtError(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	h := tab.NewHolder()
	for _, n := range []string{"a", "b", "c"} {
		wantErr(t, "acquire", h.Acquire([]byte(n), 1, 1), nil)
	}
	stop := errors.New("stop")
	calls := 0
	err := tab.Dump(func(resource.Entry) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("Dump returned %v after %d calls", err, calls)
	}
}

// TestConcurrentHolders hammers a few counters from many goroutines; run
// with -race. Afterwards each counter equals what the live holders hold.
func TestConcurrentHolders(t *testing.T) {
	tab := newTable(t, newFakeClock(0))
	names := [][]byte{[]byte("n0"), []byte("n1"), []byte("n2")}
	const workers, rounds = 16, 500
	holders := make([]*resource.Holder, workers)
	var wg sync.WaitGroup
	for w := range workers {
		h := tab.NewHolder()
		holders[w] = h
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				name := names[(w+i)%len(names)]
				if i%3 == 2 {
					h.Release(name, 1)
				} else {
					h.Acquire(name, 1, 1000)
				}
			}
		}()
	}
	wg.Wait()
	for w := 0; w < workers; w += 2 {
		holders[w].ReleaseAll()
	}
	for _, name := range names {
		var want uint32
		for w := 1; w < workers; w += 2 {
			want += holders[w].Held(string(name))
		}
		if got := get(t, tab, string(name)); got != want {
			t.Errorf("%s = %d, live holders hold %d", name, got, want)
		}
	}
}

// Both stores refuse a name no counter can have, on Get too.
func TestGetInvalidName(t *testing.T) {
	tab, err := resource.New(resource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range [][]byte{nil, make([]byte, resource.MaxNameLen+1)} {
		if _, err := tab.Get(name); !errors.Is(err, resource.ErrInvalid) {
			t.Errorf("Get(%d bytes): %v, want ErrInvalid", len(name), err)
		}
	}
}

// TestGCThenReclaim: counters at 0 that GC deletes leave the line of
// those to reclaim, so the line stays right for the next full table.
func TestGCThenReclaim(t *testing.T) {
	clock := newFakeClock(1000 * interval)
	tab, err := resource.New(resource.Options{MaxMemory: 2 * perCounter, Interval: interval * time.Second, Clock: clock.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	h := tab.NewHolder()
	for _, n := range []string{"a-counter1", "b-counter1"} {
		wantErr(t, "acquire "+n, h.Acquire([]byte(n), 1, 1), nil)
		wantErr(t, "release "+n, h.Release([]byte(n), 1), nil)
	}
	clock.Add(interval)
	if n := tab.GC(); n != 2 {
		t.Fatalf("GC deleted %d, want 2", n)
	}
	for _, n := range []string{"c-counter1", "d-counter1"} {
		wantErr(t, "acquire "+n, h.Acquire([]byte(n), 1, 1), nil)
	}
	wantErr(t, "full of held counters", h.Acquire([]byte("e-counter1"), 1, 1), resource.ErrNoMemory)
	wantErr(t, "release c", h.Release([]byte("c-counter1"), 1), nil)
	wantErr(t, "e takes c's room", h.Acquire([]byte("e-counter1"), 1, 1), nil)
	if s := tab.Stats(); s.Objects != 2 || s.Reclaimed != 1 || s.UsedMemory != 2*perCounter {
		t.Fatalf("stats %+v", s)
	}
}
