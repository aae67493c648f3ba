package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestLaterNotLostToALookUnderWay: one sender's look at the later set
// finds it empty; another sender of the same instance sets a reply aside
// before the first look's answer is noted. The reply must be handed out
// once due, not left unlooked at for LaterIdle.
func TestLaterNotLostToALookUnderWay(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		o := New(tg.Client, Options{Prefix: redistest.Prefix(t), Consumer: "a", ClaimAfter: time.Minute})
		defer o.Close()
		if err := o.Init(ctx, 42); err != nil {
			t.Fatal(err)
		}
		dueScript.Load(ctx, tg.Client)
		if err := o.Add(ctx, testReply(1)); err != nil {
			t.Fatal(err)
		}
		got, err := o.Take(ctx, 42, 1, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Take = %v, %v; want the reply", got, err)
		}
		c := o.community(42)
		c.mu.Lock()
		c.laterDue = time.Time{} // the next Take looks at the later set
		c.mu.Unlock()

		h := &gateHook{key: "A", sha: dueScript.Hash(), src: earliestLib + dueLua,
			afterReached: make(chan struct{}), afterGo: make(chan struct{})}
		tg.Client.AddHook(h)
		looked := make(chan error, 1)
		go func() {
			_, err := o.Take(context.WithValue(ctx, ctxKey("A"), 1), 42, 1, 0)
			looked <- err
		}()
		<-h.afterReached // the look found the later set empty; its answer not yet noted
		r := got[0]
		r.Tries, r.Due = 1, time.Now()
		if _, err := o.Later(ctx, 42, r); err != nil {
			t.Fatal(err)
		}
		close(h.afterGo)
		if err := <-looked; err != nil {
			t.Fatal(err)
		}
		again, err := o.Take(ctx, 42, 1, 0)
		if err != nil || len(again) != 1 || again[0].PeerID != 1 || again[0].Tries != 1 {
			t.Fatalf("Take after the reply came due = %+v, %v; want the reply set aside", again, err)
		}
	})
}
