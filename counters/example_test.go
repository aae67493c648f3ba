package counters_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/wire"
)

func Example() {
	s, err := counters.NewServer(counters.ServerOptions{})
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
