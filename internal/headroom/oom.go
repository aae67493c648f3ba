package headroom

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// IsOOM reports whether err is Redis's refusal of a write past its
// maxmemory ("OOM command not allowed when used memory > 'maxmemory'"),
// from a command or a script.
func IsOOM(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "OOM ")
}

// An OOMWatch remembers when the bot's counting script last failed because
// Redis was past its maxmemory, for readiness and the metrics. The zero
// value is ready to use; it is safe for concurrent use.
type OOMWatch struct {
	last  atomic.Int64 // Unix nanoseconds of the last OOM; 0 never
	total atomic.Uint64
}

// Observe records err of one counting call: an OOM is remembered and
// counted. It reports whether err was one.
func (w *OOMWatch) Observe(err error) bool {
	if !IsOOM(err) {
		return false
	}
	w.last.Store(time.Now().UnixNano())
	w.total.Add(1)
	return true
}

// Since returns when the last OOM was seen if it was within d of now.
func (w *OOMWatch) Since(now time.Time, d time.Duration) (time.Time, bool) {
	n := w.last.Load()
	if n == 0 {
		return time.Time{}, false
	}
	at := time.Unix(0, n)
	return at, now.Sub(at) < d
}

// Total returns the number of OOMs seen.
func (w *OOMWatch) Total() uint64 { return w.total.Load() }
