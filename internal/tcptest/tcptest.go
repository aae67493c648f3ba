// Package tcptest serves TCP connections on the loopback for tests.
package tcptest

import (
	"net"
	"sync"
	"testing"
)

// Serve listens on a free loopback port and calls handle for every
// connection, each in its own goroutine, closing the connection when handle
// returns. It returns the address. When t ends, the listener closes and
// Serve waits for every handler to return.
func Serve(t testing.TB, handle func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				handle(nc)
			})
		}
	})
	return ln.Addr().String()
}
