package client

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// DefaultVirtualNodes is the number of points each server gets on a Ring
// unless told otherwise.
const DefaultVirtualNodes = 100

// A Ring places counter names on servers by consistent hashing, so that
// every client configured with the same server addresses sends a name to
// the same server, and adding or removing a server moves only the names it
// gains or loses.
//
// The placement is ketama's (libmemcached, twemproxy, spymemcached), with
// a configurable number of points per server, so other clients can
// reproduce it exactly:
//
//   - hash(s) for a byte string s is the MD5 digest of s; point j (0…3) of
//     a digest d is the little-endian uint32 of d[4j:4j+4], a number in
//     0…2³²−1.
//   - A server whose address is A (the string as given, e.g.
//     "10.0.0.1:11215") gets V points (V = VirtualNodes, default 100):
//     point i (0…V−1) is point i mod 4 of hash(A + "-" + decimal(i div 4)).
//   - A name's position is point 0 of hash(name), the name's raw bytes.
//   - The name belongs to the server owning the first point at or after
//     its position, wrapping past 2³²−1 to the smallest point. When two
//     servers have the same point, the smaller address (byte order) owns it.
//
// With V = 160 and addresses written "host:port" this is libketama's
// continuum for servers of equal weight. A Ring is immutable and safe for
// concurrent use.
type Ring struct {
	servers []string
	points  []ringPoint // sorted by (hash, server)
}

// A ringPoint is one virtual node.
type ringPoint struct {
	hash   uint32
	server int // index into Ring.servers
}

// NewRing returns the ring of servers with vnodes points each (0 means
// DefaultVirtualNodes). Addresses must be distinct and non-empty; their
// order does not matter.
func NewRing(servers []string, vnodes int) (*Ring, error) {
	if vnodes == 0 {
		vnodes = DefaultVirtualNodes
	}
	if vnodes < 0 {
		return nil, fmt.Errorf("counters: ring: %d virtual nodes", vnodes)
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("counters: ring: no servers")
	}
	sorted := slices.Clone(servers)
	slices.Sort(sorted)
	for i, s := range sorted {
		if s == "" {
			return nil, fmt.Errorf("counters: ring: empty server address")
		}
		if i > 0 && sorted[i-1] == s {
			return nil, fmt.Errorf("counters: ring: server %q listed twice", s)
		}
	}
	r := &Ring{servers: sorted, points: make([]ringPoint, 0, len(sorted)*vnodes)}
	for si, s := range sorted {
		var d [md5.Size]byte
		for i := 0; i < vnodes; i++ {
			if i%4 == 0 {
				d = md5.Sum([]byte(s + "-" + strconv.Itoa(i/4)))
			}
			r.points = append(r.points, ringPoint{hash: digestPoint(d, i%4), server: si})
		}
	}
	// Servers are sorted, so ties go to the smaller address.
	slices.SortStableFunc(r.points, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return r, nil
}

// digestPoint returns point j of an MD5 digest.
func digestPoint(d [md5.Size]byte, j int) uint32 {
	return binary.LittleEndian.Uint32(d[4*j:])
}

// RingHash returns a name's position on the ring, 0…2³²−1.
func RingHash(name string) uint32 {
	return digestPoint(md5.Sum([]byte(name)), 0)
}

// Owner returns the address of the server the name belongs to.
func (r *Ring) Owner(name string) string { return r.servers[r.owner(name)] }

// owner returns the index of the server the name belongs to.
func (r *Ring) owner(name string) int {
	h := RingHash(name)
	i, _ := slices.BinarySearchFunc(r.points, h, func(p ringPoint, h uint32) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].server
}

// Servers returns the ring's servers, sorted. The caller must not modify
// the slice.
func (r *Ring) Servers() []string { return r.servers }
