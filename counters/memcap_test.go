package counters_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/httpapi"
	"github.com/vkcounter/vkcounter/counters/memcap"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// TestMemoryCapOverPortAndHTTP: past the memory stores' cap a new name of
// every kind is refused with Out of memory on the port and 507 with a JSON
// error naming the cap over HTTP; the names that exist keep counting.
func TestMemoryCapOverPortAndHTTP(t *testing.T) {
	const maxNames = 3
	clock := newFakeClock(day)
	stores := counters.MemoryStoresWithin(clock.Now, memcap.Limits{MaxNames: maxNames})
	srv := newServer(t, counters.ServerOptions{Stores: stores, Clock: clock.Now})
	c := dialClient(t, listen(t, srv))
	h, err := httpapi.New(stores, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cx := ctx(t)
	kinds := []struct {
		kind string
		port func(name string) error
		http func(name string) httpCall
	}{
		{"access", func(name string) error { _, err := c.Hit(cx, name); return err },
			func(name string) httpCall { return httpCall{"POST", "/counters/access/" + name, "", 0, ""} }},
		{"participant", func(name string) error { _, _, err := c.Visit(cx, name, "alice", time.Minute); return err },
			func(name string) httpCall {
				return httpCall{"POST", "/counters/participants/" + name + "/visit", `{"key":"alice"}`, 0, ""}
			}},
		{"window", func(name string) error { _, err := c.WindowHit(cx, name, time.Minute); return err },
			func(name string) httpCall {
				return httpCall{"POST", "/counters/windows/" + name, `{"window":60}`, 0, ""}
			}},
		{"unique", func(name string) error { _, err := c.UniqueAdd(cx, name, []string{"alice"}); return err },
			func(name string) httpCall {
				return httpCall{"POST", "/counters/uniques/" + name, `{"keys":["alice"]}`, 0, ""}
			}},
	}
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			for i := range maxNames {
				if err := k.port(fmt.Sprint("n", i)); err != nil {
					t.Fatalf("name %d of %d: %v", i, maxNames, err)
				}
			}
			if err := k.port("over"); !errors.Is(err, wire.StatusOutOfMemory) {
				t.Fatalf("a name past the cap over the port: %v; want Out of memory", err)
			}
			call := k.http("over")
			call.code, call.want = http.StatusInsufficientStorage, "cap (max names)"
			call.do(t, h)
			if err := k.port("n0"); err != nil {
				t.Fatalf("an existing name over the port: %v", err)
			}
			call = k.http("n1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, loopbackRequest(call.method, call.path, strings.NewReader(call.body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("an existing name over HTTP: %d %s", rec.Code, rec.Body)
			}
		})
	}
}
