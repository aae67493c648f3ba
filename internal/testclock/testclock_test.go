package testclock_test

import (
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/testclock"
)

func TestAdvance(t *testing.T) {
	var c testclock.Clock
	before := time.Now()
	if got := c.Now(); got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("a new clock says %v, want the machine's time %v", got, before)
	}
	c.Advance(time.Hour)
	c.Advance(30 * time.Minute)
	if ahead := c.Now().Sub(time.Now()); ahead < 90*time.Minute-time.Minute || ahead > 90*time.Minute {
		t.Fatalf("after advancing 1h30m the clock is %v ahead", ahead)
	}
	defer func() {
		if recover() == nil {
			t.Error("Advance by a negative duration did not panic")
		}
	}()
	c.Advance(-time.Second)
}
