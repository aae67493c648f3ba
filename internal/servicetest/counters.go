package servicetest

import (
	"context"
	"testing"

	"github.com/vkcounter/vkcounter/counters/client"
)

// DialCounters connects a counter client to addr within ctx, closed when
// t ends.
func DialCounters(ctx context.Context, t testing.TB, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
