package bot

import (
	"context"
	"time"

	"github.com/vkcounter/vkcounter/bot/outbox"
)

// StoredOutbox adapts o, the Redis outbox of package outbox, to Outbox: a
// Reply is stored as an outbox.Entry, which has the same fields.
func StoredOutbox(o *outbox.Outbox) Outbox { return storedOutbox{o} }

// StoredRecorder adapts r, which counts and stores in one script, to
// Recorder.
func StoredRecorder(r *outbox.Recorder) Recorder { return storedRecorder{r} }

type storedOutbox struct{ o *outbox.Outbox }

func (s storedOutbox) Add(ctx context.Context, r Reply) error { return s.o.Add(ctx, outbox.Entry(r)) }

func (s storedOutbox) Take(ctx context.Context, group, n int, wait time.Duration) ([]Reply, error) {
	es, err := s.o.Take(ctx, group, n, wait)
	return replies(es), err
}

func (s storedOutbox) Drain(ctx context.Context, group, n int) ([]Reply, bool, error) {
	es, done, err := s.o.Drain(ctx, group, n)
	return replies(es), done, err
}

func (s storedOutbox) Done(ctx context.Context, group int, ids ...string) error {
	return s.o.Done(ctx, group, ids...)
}

func (s storedOutbox) Release(ctx context.Context, group int) (int, error) {
	return s.o.Release(ctx, group)
}

// replies converts entries taken from the outbox.
func replies(es []outbox.Entry) []Reply {
	if len(es) == 0 {
		return nil
	}
	rs := make([]Reply, len(es))
	for i, e := range es {
		rs[i] = Reply(e)
	}
	return rs
}

type storedRecorder struct{ r *outbox.Recorder }

func (s storedRecorder) Record(ctx context.Context, textKey, dedupeKey string, r Reply) (int64, bool, error) {
	return s.r.Record(ctx, textKey, dedupeKey, outbox.Entry(r))
}
