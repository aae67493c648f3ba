package client_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/client"
)

// TestRingFixture checks the placement against testdata/ring.txt, which an
// independent implementation of the documented scheme produced.
func TestRingFixture(t *testing.T) {
	f, err := os.Open("testdata/ring.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := client.NewRing([]string{"10.0.0.3:11215", "10.0.0.1:11215", "10.0.0.2:11215"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "name" {
			continue
		}
		name, err := strconv.Unquote(fields[1])
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		if got := strconv.FormatUint(uint64(client.RingHash(name)), 10); got != fields[2] {
			t.Errorf("RingHash(%q) = %s, want %s", name, got, fields[2])
		}
		if got := r.Owner(name); got != fields[3] {
			t.Errorf("Owner(%q) = %s, want %s", name, got, fields[3])
		}
		names++
	}
	if names < 10 {
		t.Fatalf("only %d names in the fixture", names)
	}
}

// ringNames returns n test names.
func ringNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("counter-%d", i)
	}
	return names
}

func owners(r *client.Ring, names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = r.Owner(n)
	}
	return m
}

func mustRing(t *testing.T, servers ...string) *client.Ring {
	t.Helper()
	r, err := client.NewRing(servers, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRingBalanceAndMovement: 3 servers, 10,000 names: each server owns a
// third ±15 %; removing a server moves only its names; adding a fourth
// moves about a quarter, only to it.
func TestRingBalanceAndMovement(t *testing.T) {
	names := ringNames(10000)
	a, b, c, d := "10.0.0.1:11215", "10.0.0.2:11215", "10.0.0.3:11215", "10.0.0.4:11215"
	three := owners(mustRing(t, a, b, c), names)
	share := map[string]int{}
	for _, s := range three {
		share[s]++
	}
	third := float64(len(names)) / 3
	for _, s := range []string{a, b, c} {
		if dev := math.Abs(float64(share[s])-third) / third; dev > 0.15 {
			t.Errorf("%s owns %d names, %.1f%% off a third", s, share[s], 100*dev)
		}
	}
	t.Logf("shares of 3 servers: %v", share)

	two := owners(mustRing(t, a, c), names)
	for n, s := range three {
		if s != b && two[n] != s {
			t.Fatalf("removing %s moved %q from %s to %s", b, n, s, two[n])
		}
		if two[n] == b {
			t.Fatalf("%q still on the removed server", n)
		}
	}

	four := owners(mustRing(t, a, b, c, d), names)
	moved := 0
	for n, s := range three {
		if four[n] != s {
			if four[n] != d {
				t.Fatalf("adding %s moved %q from %s to %s", d, n, s, four[n])
			}
			moved++
		}
	}
	if f := float64(moved) / float64(len(names)); f < 0.25*0.85 || f > 0.25*1.15 {
		t.Errorf("adding a fourth server moved %.1f%% of the names, want about 25%%", 100*f)
	}
	t.Logf("adding a fourth server moved %d of %d names", moved, len(names))
}

func TestRingOrderDoesNotMatter(t *testing.T) {
	names := ringNames(1000)
	x := owners(mustRing(t, "a:1", "b:1", "c:1"), names)
	y := owners(mustRing(t, "c:1", "a:1", "b:1"), names)
	for n := range x {
		if x[n] != y[n] {
			t.Fatalf("%q: %s vs %s", n, x[n], y[n])
		}
	}
}

func TestRingRejects(t *testing.T) {
	for _, tc := range []struct {
		servers []string
		vnodes  int
		want    string
	}{
		{nil, 0, "no servers"},
		{[]string{"a:1", "a:1"}, 0, "listed twice"},
		{[]string{""}, 0, "empty server"},
		{[]string{"a:1"}, -1, "virtual nodes"},
	} {
		if _, err := client.NewRing(tc.servers, tc.vnodes); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRing(%q, %d) = %v, want an error with %q", tc.servers, tc.vnodes, err, tc.want)
		}
	}
}
