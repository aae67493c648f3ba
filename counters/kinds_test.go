package counters_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// forEachKindStore runs body with access, window and unique stores of
// every kind: memory, and Redis on every backend, each run as a subtest.
func forEachKindStore(t *testing.T, body func(t *testing.T, clock *fakeClock, stores counters.Stores)) {
	t.Run("memory", func(t *testing.T) {
		clock := newFakeClock(day)
		body(t, clock, counters.MemoryStores(clock.Now))
	})
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		prefix := redistest.Prefix(t)
		t.Cleanup(func() { delKeys(t, tg, prefix) })
		clock := newFakeClock(day)
		w, err := window.NewRedis(tg.Client, prefix)
		if err != nil {
			t.Fatal(err)
		}
		u, err := unique.NewRedis(tg.Client, prefix)
		if err != nil {
			t.Fatal(err)
		}
		stores := counters.MemoryStores(clock.Now)
		stores.Access, stores.Windows, stores.Uniques = redisAccess(t, tg.Client, prefix), w.WithClock(clock.Now), u
		body(t, clock, stores)
	})
}

// TestKindsOverThePort runs the window and unique opcodes through the
// client, pipelined, and with invalid arguments.
func TestKindsOverThePort(t *testing.T) {
	forEachKindStore(t, func(t *testing.T, clock *fakeClock, stores counters.Stores) {
		c := dialClient(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores})))
		cx := ctx(t)
		for want := range int64(3) {
			if n, err := c.WindowHit(cx, "api", time.Minute); n != want || err != nil {
				t.Fatalf("WindowHit = %d, %v; want %d", n, err, want)
			}
		}
		clock.Set(day + 60)
		if n, err := c.WindowCount(cx, "api", time.Minute); n != 0 || err != nil {
			t.Fatalf("WindowCount after the window = %d, %v", n, err)
		}
		if _, err := c.UniqueCount(cx, "visitors"); !errors.Is(err, wire.StatusNotFound) {
			t.Fatalf("UniqueCount before any add: %v, want Not found", err)
		}
		if changed, err := c.UniqueAdd(cx, "visitors", []string{"a", "b"}); !changed || err != nil {
			t.Fatalf("UniqueAdd = %v, %v", changed, err)
		}
		if changed, err := c.UniqueAdd(cx, "visitors", []string{"b"}); changed || err != nil {
			t.Fatalf("UniqueAdd again = %v, %v", changed, err)
		}
		c.UniqueAdd(cx, "other", []string{"c"})
		if n, err := c.UniqueCount(cx, "visitors", "other"); n != 3 || err != nil {
			t.Fatalf("UniqueCount of the union = %d, %v", n, err)
		}

		p := c.Pipeline()
		p.WindowHit("api", 60)
		p.WindowHit("api", 0) // invalid window
		p.WindowCount("api", 60)
		p.UniqueAdd("visitors", []string{"z"})
		p.UniqueCount([]string{"visitors"})
		p.UniqueCount([]string{"nobody"})
		p.UniqueAdd("visitors", []string{strings.Repeat("k", 256)})
		res, err := p.Exec(cx)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, r := range res {
			got = append(got, strconv.Itoa(int(r.Status))+":"+strconv.FormatUint(r.Total, 10)+":"+strconv.FormatBool(r.Flag))
		}
		want := "0:0:false 4:0:false 0:1:false 0:0:true 0:3:false 1:0:false 4:0:false"
		if strings.Join(got, " ") != want {
			t.Fatalf("pipelined answers %s, want %s", strings.Join(got, " "), want)
		}
		if _, err := c.WindowHit(cx, "api", 8*24*time.Hour); !errors.Is(err, wire.ErrInvalid) {
			t.Fatalf("WindowHit of 8 days: %v, want a client-side ErrInvalid", err)
		}
	})
}

// TestKindsStats: the new opcodes are counted in Stats.
func TestKindsStats(t *testing.T) {
	s := newServer(t, counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	c := dialClient(t, listen(t, s))
	cx := ctx(t)
	c.WindowHit(cx, "a", time.Second)
	c.WindowCount(cx, "a", time.Second)
	c.UniqueAdd(cx, "u", []string{"k"})
	c.UniqueCount(cx, "u")
	st := statsMap(s)
	for _, k := range []string{"command:whit", "command:wcount", "command:uadd", "command:ucount"} {
		if st[k] != "1" {
			t.Errorf("%s = %q, want 1", k, st[k])
		}
	}
}

func TestKindsHTTP(t *testing.T) {
	forEachKindStore(t, func(t *testing.T, clock *fakeClock, stores counters.Stores) {
		h, err := httpapi.New(stores, httpapi.Options{})
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("n", 256)
		tooMany := `{"keys":["` + strings.Repeat(`k","`, 1000) + `k"]}`
		for _, c := range []httpCall{
			{"POST", "/counters/windows/api", `{"window":3600}`, 200, `{"name":"api","window":3600,"previous":0}`},
			{"POST", "/counters/windows/api", `{"window":3600}`, 200, `{"name":"api","window":3600,"previous":1}`},
			{"GET", "/counters/windows/api?window=3600", "", 200, `{"name":"api","window":3600,"count":2}`},
			{"GET", "/counters/windows/api?window=60", "", 200, `{"name":"api","window":60,"count":0}`},
			{"GET", "/counters/windows/api", "", 400, "window"},
			{"GET", "/counters/windows/api?window=x", "", 400, "window"},
			{"GET", "/counters/windows/api?window=0", "", 400, "invalid window"},
			{"POST", "/counters/windows/api", `{"window":604801}`, 400, "invalid window"},
			{"POST", "/counters/windows/api", `{}`, 400, "invalid window"},
			{"POST", "/counters/windows/api", ``, 400, "empty body"},
			{"POST", "/counters/windows/" + long, `{"window":1}`, 400, "invalid counter name"},
			{"POST", "/counters/windows/", `{"window":1}`, 400, "empty counter name"},
			{"DELETE", "/counters/windows/api", ``, 405, "not allowed"},
			{"GET", "/counters/uniques/visitors", "", 404, "not found"},
			{"POST", "/counters/uniques/visitors", `{"keys":["a","b","a"]}`, 200, `{"name":"visitors","changed":true}`},
			{"POST", "/counters/uniques/visitors", `{"keys":["b"]}`, 200, `{"name":"visitors","changed":false}`},
			{"GET", "/counters/uniques/visitors", "", 200, `{"name":"visitors","estimate":2}`},
			{"POST", "/counters/uniques/others", `{"keys":["c"]}`, 200, `{"name":"others","changed":true}`},
			{"GET", "/counters/uniques?names=visitors,others", "", 200, `{"names":["visitors","others"],"estimate":3}`},
			{"GET", "/counters/uniques?names=visitors&names=nobody", "", 200, `{"names":["visitors","nobody"],"estimate":2}`},
			{"GET", "/counters/uniques?names=nobody,none", "", 404, "not found"},
			{"GET", "/counters/uniques", "", 400, "names"},
			{"GET", "/counters/uniques?names=a,,b", "", 400, "invalid counter name"},
			{"POST", "/counters/uniques/visitors", `{"keys":[]}`, 400, "invalid number"},
			{"POST", "/counters/uniques/visitors", tooMany, 400, "invalid number"},
			{"POST", "/counters/uniques/visitors", `{"keys":[""]}`, 400, "invalid key"},
			{"POST", "/counters/uniques/visitors", `{"key":"a"}`, 400, "unknown field"},
			{"POST", "/counters/uniques", `{"keys":["a"]}`, 405, "not allowed"},
		} {
			c.do(t, h)
		}
	})
}

func TestAccessListHTTP(t *testing.T) {
	h, err := httpapi.New(counters.MemoryStores(nil), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []httpCall{
		{"GET", "/counters/access?prefix=page_", "", 200, `{"prefix":"page_","counters":[],"sum":0,"cursor":""}`},
		{"POST", "/counters/access/page_b", `{"delta":2}`, 200, `{"name":"page_b","total":2}`},
		{"POST", "/counters/access/page_a", "", 200, `{"name":"page_a","total":1}`},
		{"POST", "/counters/access/page_c", `{"delta":4}`, 200, `{"name":"page_c","total":4}`},
		{"POST", "/counters/access/other", "", 200, `{"name":"other","total":1}`},
		{"GET", "/counters/access?prefix=page_&limit=2", "", 200,
			`{"prefix":"page_","counters":[{"name":"page_a","total":1},{"name":"page_b","total":2}],"sum":3,"cursor":"cGFnZV9i"}`},
		{"GET", "/counters/access?prefix=page_&limit=2&cursor=cGFnZV9i", "", 200,
			`{"prefix":"page_","counters":[{"name":"page_c","total":4}],"sum":4,"cursor":""}`},
		{"GET", "/counters/access?prefix=page_&limit=3", "", 200,
			`{"prefix":"page_","counters":[{"name":"page_a","total":1},{"name":"page_b","total":2},{"name":"page_c","total":4}],"sum":7,"cursor":""}`},
		{"GET", "/counters/access", "", 200,
			`{"prefix":"","counters":[{"name":"other","total":1},{"name":"page_a","total":1},{"name":"page_b","total":2},{"name":"page_c","total":4}],"sum":8,"cursor":""}`},
		{"GET", "/counters/access?limit=0", "", 400, "invalid limit"},
		{"GET", "/counters/access?limit=1001", "", 400, "invalid limit"},
		{"GET", "/counters/access?limit=x", "", 400, "limit"},
		{"GET", "/counters/access?cursor=!!", "", 400, "cursor"},
		{"POST", "/counters/access", "", 405, "not allowed"},
	} {
		c.do(t, h)
	}
	file, err := access.NewFile(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err = httpapi.New(memoryStoresWith(func(s *counters.Stores) { s.Access = file }), httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpCall{"GET", "/counters/access?prefix=a", "", 501, "cannot list"}.do(t, h)
}

// TestListOverThePort pages through access counters by prefix with the
// List opcode: each counter once, in byte order, with its total.
func TestListOverThePort(t *testing.T) {
	forEachKindStore(t, func(t *testing.T, clock *fakeClock, stores counters.Stores) {
		c := dialClient(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores})))
		cx := ctx(t)
		for i := range 25 {
			if _, err := c.Add(cx, "page_"+strconv.Itoa(i), int64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		c.Hit(cx, "other")
		var names []string
		var sum int64
		for after := ""; ; {
			entries, more, err := c.List(cx, "page_", after, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) > 7 {
				t.Fatalf("page of %d", len(entries))
			}
			for _, e := range entries {
				names = append(names, e.Name)
				sum += e.Total
				after = e.Name
			}
			if !more {
				break
			}
		}
		if len(names) != 25 || !slices.IsSorted(names) || sum != 25*26/2 {
			t.Fatalf("listed %d names %q, sum %d; want the 25 page_ counters once, sum 325", len(names), names, sum)
		}
		if entries, more, err := c.List(cx, "zzz", "", 10); len(entries) != 0 || more || err != nil {
			t.Fatalf("List(zzz) = %v, %v, %v", entries, more, err)
		}
		raw := dial(t, listen(t, newServer(t, counters.ServerOptions{Stores: stores})))
		// Limit 0 is refused by the store: Invalid arguments, connection kept.
		equalBytes(t, "limit 0", exchange(t, raw, wire.AppendList(nil, 9, "page_", "", 0), 12+17),
			"91 28 04 00 00000011 00000009 496e76616c696420617267756d656e7473")
	})
}

// TestWireLimitsFitTheStores: the codec bounds the extension opcodes'
// bodies by wire.MaxFieldLen, so every name and key a store accepts must
// fit it, and the unique counters' counts must match the codec's.
func TestWireLimitsFitTheStores(t *testing.T) {
	for name, n := range map[string]int{
		"access.MaxNameLen": access.MaxNameLen, "participant.MaxNameLen": participant.MaxNameLen,
		"participant.MaxKeyLen": participant.MaxKeyLen, "window.MaxNameLen": window.MaxNameLen,
		"unique.MaxNameLen": unique.MaxNameLen, "unique.MaxKeyLen": unique.MaxKeyLen,
	} {
		if n != wire.MaxFieldLen {
			t.Errorf("%s = %d, want wire.MaxFieldLen (%d)", name, n, wire.MaxFieldLen)
		}
	}
	if unique.MaxKeys != wire.MaxUniqueKeys || unique.MaxNames != wire.MaxUnionNames || access.MaxListLimit > 1<<16-1 {
		t.Errorf("unique.MaxKeys %d, MaxNames %d; wire %d, %d", unique.MaxKeys, unique.MaxNames, wire.MaxUniqueKeys, wire.MaxUnionNames)
	}
}
