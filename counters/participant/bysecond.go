package participant

import (
	"slices"

	"github.com/vkcounter/vkcounter/counters/memcap"
)

// bySecond counts a memory set's keys by the second they were last seen,
// and answers how many were seen at or after a second in O(log n) of the
// distinct seconds (a Fenwick tree over them, in ascending order). A key
// seen in a second after every other is added in O(log n); a second
// before the newest (a clock gone back) is put in place by rebuilding
// the tree, O(n). Seconds left with no key are dropped when they are half
// of them (a rebuild: O(1) amortized). It is not safe for concurrent use.
type bySecond struct {
	secs  []int64 // distinct seconds, ascending
	n     []int   // keys per second
	tree  []int   // Fenwick tree over n, 1-based: tree[i] sums n[i-lowbit(i) : i]
	total int     // keys
	empty int     // seconds with no key
}

// add counts d more keys (negative: fewer) seen in the second sec.
func (c *bySecond) add(sec int64, d int) {
	c.total += d
	i, found := slices.BinarySearch(c.secs, sec)
	switch {
	case found:
		if c.n[i] == 0 {
			c.empty--
		}
		c.n[i] += d
		if c.n[i] == 0 {
			c.empty++
		}
		for j := i + 1; j < len(c.tree); j += j & -j {
			c.tree[j] += d
		}
		if c.empty > 64 && c.empty > len(c.secs)/2 {
			c.rebuild()
		}
	case i == len(c.secs):
		c.secs = append(c.secs, sec)
		c.n = append(c.n, d)
		if len(c.tree) == 0 {
			c.tree = append(c.tree, 0)
		}
		k := len(c.secs) // 1-based index of the new second
		c.tree = append(c.tree, d+c.prefix(k-1)-c.prefix(k-(k&-k)))
	default:
		c.secs = slices.Insert(c.secs, i, sec)
		c.n = slices.Insert(c.n, i, d)
		c.rebuild()
	}
}

// bytes is the estimated memory of c's slices.
func (c *bySecond) bytes() int64 {
	return memcap.Alloc(8*int64(cap(c.secs))) + memcap.Alloc(8*int64(cap(c.n))) + memcap.Alloc(8*int64(cap(c.tree)))
}

// growth is the most bytes can rise by one more second: each slice may
// double.
func (c *bySecond) growth() int64 {
	return 2*memcap.Alloc(8*int64(2*cap(c.secs)+1)) + memcap.Alloc(8*int64(2*cap(c.tree)+2))
}

// prefix returns the keys of the first k seconds.
func (c *bySecond) prefix(k int) int {
	s := 0
	for ; k > 0; k -= k & -k {
		s += c.tree[k]
	}
	return s
}

// since returns the keys seen at or after the second sec.
func (c *bySecond) since(sec int64) int {
	i, _ := slices.BinarySearch(c.secs, sec)
	return c.total - c.prefix(i)
}

// rebuild drops the seconds with no key and builds the tree again, O(n).
func (c *bySecond) rebuild() {
	secs, n := c.secs[:0], c.n[:0]
	for i, sec := range c.secs {
		if c.n[i] != 0 {
			secs = append(secs, sec)
			n = append(n, c.n[i])
		}
	}
	c.secs, c.n, c.empty = slices.Clip(secs), slices.Clip(n), 0
	c.tree = make([]int, len(c.n)+1)
	for i, v := range c.n {
		j := i + 1
		c.tree[j] += v
		if p := j + (j & -j); p < len(c.tree) {
			c.tree[p] += c.tree[j]
		}
	}
}
