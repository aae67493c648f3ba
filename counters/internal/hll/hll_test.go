package hll_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/counters/internal/hll"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestMatchesRedis adds the same elements to a Sketch and, with PFADD, to a
// real Redis, and checks that every PFADD answer, every estimate and the
// registers decoded from Redis's value (sparse, then dense) are the same.
func TestMatchesRedis(t *testing.T) {
	tg := redistest.Open(t, redistest.Real)
	ctx := context.Background()
	key := redistest.Prefix(t) + "hll"
	t.Cleanup(func() { tg.Client.Del(context.Background(), key) })
	var s hll.Sketch
	n := 0
	for _, upto := range []int{1, 10, 100, 1000, 5000, 20000, 200000} {
		for n < upto {
			// One pipeline per batch: PFADD's answers come back in order.
			pipe := tg.Client.Pipeline()
			var elems []string
			var cmds []*redis.IntCmd
			for ; n < upto && len(elems) < 1000; n++ {
				elems = append(elems, "user:"+strconv.Itoa(n*7919))
				cmds = append(cmds, pipe.PFAdd(ctx, key, elems[len(elems)-1]))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for i, elem := range elems {
				if changed := s.AddString(elem); changed != (cmds[i].Val() == 1) {
					t.Fatalf("%q: Add = %v, PFADD = %d", elem, changed, cmds[i].Val())
				}
				if i%10 == 0 && s.AddString(elem) { // a repeat changes nothing
					t.Fatalf("%q added twice changed a register", elem)
				}
			}
		}
		want, err := tg.Client.PFCount(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Estimate(); got != uint64(want) {
			t.Fatalf("%d elements: Estimate = %d, PFCOUNT = %d", n, got, want)
		}
		raw, err := tg.Client.Get(ctx, key).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		var regs [hll.Registers]uint8
		if err := hll.DecodeInto(&regs, raw); err != nil {
			t.Fatalf("%d elements (encoding %d): %v", n, raw[4], err)
		}
		if got := hll.Estimate(&regs); got != uint64(want) {
			t.Fatalf("%d elements (encoding %d): decoded estimate = %d, PFCOUNT = %d", n, raw[4], got, want)
		}
	}
}

// TestUnion: merged registers estimate the union, as PFCOUNT of several keys.
func TestUnion(t *testing.T) {
	var a, b hll.Sketch
	for i := range 30000 {
		a.AddString(strconv.Itoa(i))
		b.AddString(strconv.Itoa(i + 20000))
	}
	var regs [hll.Registers]uint8
	a.MergeInto(&regs)
	b.MergeInto(&regs)
	if got := hll.Estimate(&regs); got < 49000 || got > 51000 {
		t.Fatalf("union of 0…29999 and 20000…49999 = %d, want 50000 ± 2 %%", got)
	}
	var empty hll.Sketch
	if !empty.Empty() || empty.Estimate() != 0 {
		t.Fatal("an empty sketch is not empty")
	}
}

func TestDecodeRejects(t *testing.T) {
	var regs [hll.Registers]uint8
	for _, v := range []string{"", "HYLX" + string(make([]byte, 12)), "HYLL\x00" + string(make([]byte, 11)), "HYLL\x01" + string(make([]byte, 11)) + "\x7f", "HYLL\x02" + string(make([]byte, 11))} {
		if err := hll.DecodeInto(&regs, []byte(v)); err == nil {
			t.Errorf("DecodeInto(%q) succeeded", v)
		}
	}
}

// TestGrowthBound: adding n elements never grows Size past GrowthBound(n),
// sparse, turning dense, or dense.
func TestGrowthBound(t *testing.T) {
	var s hll.Sketch
	for i := 0; i < 5000; {
		n := 1 + i%97
		bound, size := s.GrowthBound(n), s.Size()
		for j := range n {
			s.AddString(strconv.Itoa(i + j))
		}
		if grew := s.Size() - size; grew > bound {
			t.Fatalf("adding %d elements to a sketch of %d bytes grew it by %d; bound %d", n, size, grew, bound)
		}
		i += n
	}
	if s.Size() != hll.Registers || s.GrowthBound(1000) != 0 {
		t.Fatalf("after 5000 elements: Size %d, GrowthBound %d; want dense, no growth", s.Size(), s.GrowthBound(1000))
	}
}
