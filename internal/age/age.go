// Package age encodes how old a reading is, as the service's /stats shows
// it: figures read from Redis earlier, so that showing them makes no Redis
// call, each with the age of its reading.
package age

import (
	"strconv"
	"time"
)

// Seconds is how long ago a figure was read. In JSON it is a number of
// seconds rounded to the millisecond, and -1 (any negative value) when the
// figure was never read.
type Seconds time.Duration

// Never is the age of a figure not read yet.
const Never Seconds = -1

// Since is the age of a reading taken at t, or Never if t is zero.
func Since(t time.Time) Seconds {
	if t.IsZero() {
		return Never
	}
	return Seconds(time.Since(t))
}

// MarshalJSON encodes s as seconds, -1 for Never.
func (s Seconds) MarshalJSON() ([]byte, error) {
	if s < 0 {
		return []byte("-1"), nil
	}
	secs := time.Duration(s).Round(time.Millisecond).Seconds()
	return strconv.AppendFloat(nil, secs, 'f', -1, 64), nil
}
