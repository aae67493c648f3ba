package counters_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/wire"
)

func Example() {
	s, err := counters.NewServer(counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go s.Serve(ln)

	ctx := context.Background()
	c, err := counters.Dial(ctx, ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// At most 2 workers at once.
	n, err := c.Acquire(ctx, "workers", 2, 2)
	fmt.Println("acquired", n, err)
	_, err = c.Acquire(ctx, "workers", 1, 2)
	fmt.Println("third worker refused:", errors.Is(err, wire.StatusNotAvailable))
	fmt.Println("release:", c.Release(ctx, "workers", 1))
	used, err := c.Get(ctx, "workers")
	fmt.Println("in use", used, err)

	// Many requests in one write.
	p := c.Pipeline()
	p.Acquire("workers", 1, 2)
	p.Get("workers")
	p.Release("nobody", 1)
	res, err := p.Exec(ctx)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.Op, r.Status, r.Value)
	}
	// Output:
	// acquired 2 <nil>
	// third worker refused: true
	// release: <nil>
	// in use 1 <nil>
	// acquire OK 1
	// get OK 2
	// release Not found 0
}

// The access and participant counters: with no Stores given, the server
// keeps them in memory.
func ExampleClient_Hit() {
	s, err := counters.NewServer(counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go s.Serve(ln)
	ctx := context.Background()
	c, err := counters.Dial(ctx, ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, err = c.Total(ctx, "pages")
	fmt.Println("never hit:", errors.Is(err, wire.StatusNotFound))
	c.Hit(ctx, "pages")
	fmt.Println(c.Hit(ctx, "pages"))

	fmt.Println(c.Visit(ctx, "room", "alice", 5*time.Minute))
	fmt.Println(c.Visit(ctx, "room", "alice", 5*time.Minute)) // not counted twice
	fmt.Println(c.Visit(ctx, "room", "bob", 0))               // 0: the default timeout
	fmt.Println(c.Leave(ctx, "room", "alice"))
	fmt.Println(c.Active(ctx, "room", 0))
	// Output:
	// never hit: true
	// 2 <nil>
	// 1 true <nil>
	// 1 false <nil>
	// 2 true <nil>
	// 1 true <nil>
	// 1 <nil>
}

func ExampleHTTPHandler() {
	h, err := counters.NewHTTPHandler(counters.MemoryStores(nil), counters.HTTPOptions{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, r := range []struct{ method, path, body string }{
		{"POST", "/counters/access/pages", ""},
		{"GET", "/counters/access/pages", ""},
		{"GET", "/counters/access/never", ""},
		{"POST", "/counters/participants/room/visit", `{"key":"alice","timeout":300}`},
		{"GET", "/counters/participants/room?timeout=300", ""},
		{"POST", "/counters/participants/room/leave", `{"key":""}`},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	// Output:
	// 200 {"name":"pages","total":1}
	// 200 {"name":"pages","total":1}
	// 404 {"error":"access: counter not found"}
	// 200 {"name":"room","key":"alice","active":1,"new":true}
	// 200 {"name":"room","active":1}
	// 400 {"error":"participant: invalid key: length 0, want 1 to 255 bytes"}
}
