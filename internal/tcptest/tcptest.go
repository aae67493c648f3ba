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

// FreeAddr returns a loopback address no one listens on now: for a
// server under test that must be given its address before it starts (a
// second instance on the same port, a child process).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Reserve is FreeAddr for an address bound only after other listeners
// start (the service's own, given :0): the port stays taken until release
// is called, so the kernel gives none of them this one.
func Reserve(t testing.TB) (addr string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() { ln.Close() }
}

// HostIP returns a non-loopback IPv4 address of this machine, to reach a
// listener the way another host would; it skips the test when there is
// none.
func HostIP(t testing.TB) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address")
	return nil
}
