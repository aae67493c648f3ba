package age_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/age"
)

func TestMarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		s    age.Seconds
		want string
	}{
		{age.Never, "-1"},
		{age.Seconds(-5 * time.Second), "-1"},
		{0, "0"},
		{age.Seconds(1500*time.Millisecond + 400*time.Microsecond), "1.5"},
		{age.Seconds(2*time.Second + 600*time.Microsecond), "2.001"},
		{age.Seconds(90 * time.Minute), "5400"},
	} {
		b, err := json.Marshal(tc.s)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", time.Duration(tc.s), b, err, tc.want)
		}
	}
}

func TestSince(t *testing.T) {
	if got := age.Since(time.Time{}); got != age.Never {
		t.Errorf("Since(zero) = %v, want Never", got)
	}
	if got := age.Since(time.Now().Add(-time.Minute)); got < age.Seconds(time.Minute) || got > age.Seconds(2*time.Minute) {
		t.Errorf("Since(a minute ago) = %v", time.Duration(got))
	}
}
