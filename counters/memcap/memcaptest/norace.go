//go:build !race

package memcaptest

const race = false
