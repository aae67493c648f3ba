package redisconn

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The causes (of Causes) of a server that answers but takes no write: each
// managed service words them its own way, and Cause maps them all here.
const (
	// CauseOOM: the server is full (Redis and ElastiCache/Memorystore's
	// "OOM command not allowed…", Upstash's "ERR DB capacity quota
	// exceeded", Dragonfly's "Out of memory").
	CauseOOM = "oom"
	// CauseQuota: the plan's request quota is spent (Upstash's "ERR max
	// requests limit exceeded", "ERR max daily request limit exceeded"):
	// every command fails until the quota renews or the plan is raised.
	CauseQuota = "quota"
	// CauseReadOnly: the server is a read-only replica (READONLY), as the
	// old master of a failover the client still reaches is.
	CauseReadOnly = "readonly"
)

// WriteRefusals are the causes of a server refusing writes while it
// answers, each with what /readyz says of it.
var WriteRefusals = map[string]string{
	CauseOOM:      "out of memory",
	CauseQuota:    "request quota exceeded",
	CauseReadOnly: "read-only replica",
}

// capacityErrors and quotaErrors are the error replies, but Redis's own
// OOM, that mean CauseOOM and CauseQuota, lower-case, without "ERR ".
var (
	capacityErrors = []string{"db capacity quota exceeded", "out of memory"}
	quotaErrors    = []string{"max requests limit exceeded", "max daily request limit exceeded", "max monthly request limit exceeded"}
)

// managedCause returns CauseOOM or CauseQuota for an error reply of a
// managed service that means one, else "".
func managedCause(msg string) string {
	msg = strings.ToLower(strings.TrimPrefix(msg, "ERR "))
	for _, m := range capacityErrors {
		if strings.HasPrefix(msg, m) {
			return CauseOOM
		}
	}
	for _, m := range quotaErrors {
		if strings.HasPrefix(msg, m) {
			return CauseQuota
		}
	}
	return ""
}

// A WriteWatch remembers the last write a server refused while it answers
// (a cause of WriteRefusals), for readiness and the metrics. The zero value
// is ready to use; it is safe for concurrent use.
type WriteWatch struct {
	mu    sync.Mutex
	last  time.Time // of the last refusal; zero: none
	cause string
	err   error
	total [3]atomic.Uint64 // by writeCauses
}

// writeCauses orders WriteRefusals' causes for WriteWatch.total.
var writeCauses = [...]string{CauseOOM, CauseQuota, CauseReadOnly}

// Observe records err of one write: a refusal of WriteRefusals is
// remembered and counted. It returns its cause, or "".
func (w *WriteWatch) Observe(err error) string {
	cause := Cause(err)
	for i, c := range writeCauses {
		if c == cause {
			w.total[i].Add(1)
			w.mu.Lock()
			w.last, w.cause, w.err = time.Now(), cause, err
			w.mu.Unlock()
			return cause
		}
	}
	return ""
}

// Since returns the last refusal, its cause and when it was seen, if it was
// within d of now; else ok is false.
func (w *WriteWatch) Since(now time.Time, d time.Duration) (cause string, err error, at time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last.IsZero() || now.Sub(w.last) >= d {
		return "", nil, time.Time{}, false
	}
	return w.cause, w.err, w.last, true
}

// Total returns the number of refusals seen with cause.
func (w *WriteWatch) Total(cause string) uint64 {
	for i, c := range writeCauses {
		if c == cause {
			return w.total[i].Load()
		}
	}
	return 0
}

// IsOOM reports whether err is a server's refusal of a write past its
// memory (CauseOOM), from a command or a script, in any of the wordings
// of the servers the service runs on.
func IsOOM(err error) bool { return Cause(err) == CauseOOM }
