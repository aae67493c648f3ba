package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/client"
	"github.com/vkcounter/vkcounter/counters/wire"
)

// startServer starts a counter server keeping its counters in memory on a
// free loopback port and returns its address and how to stop it.
func startServer() (addr string, stop func()) {
	s, err := counters.NewServer(counters.ServerOptions{Stores: counters.MemoryStores(nil)})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		panic(err)
	}
	go s.Serve(ln)
	return ln.Addr().String(), func() { s.Close() }
}

func Example() {
	addr, stop := startServer()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
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
	addr, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
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

// A RingPipeline sends each server its share of the requests in one write,
// all servers at once, and returns the results in the order queued.
func ExampleRingClient_Pipeline() {
	var addrs []string
	for range 3 {
		addr, stop := startServer()
		defer stop()
		addrs = append(addrs, addr)
	}
	ctx := context.Background()
	rc, err := client.NewRingClient(ctx, addrs, client.RingOptions{})
	if err != nil {
		panic(err)
	}
	defer rc.Close()

	p := rc.Pipeline()
	for _, name := range []string{"pages", "posts", "pages"} {
		p.Hit(name)
	}
	p.Acquire("workers", 1, 2)
	res, err := p.Exec(ctx)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.Op, r.Status, r.Total, r.Value)
	}
	// Output:
	// hit OK 1 0
	// hit OK 1 0
	// hit OK 2 0
	// acquire OK 0 1
}
