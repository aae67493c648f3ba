package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

type ctxKey string

// gateHook blocks a script call made under a context carrying key, whose
// first arg is the script's sha (or source), before and/or after it runs.
type gateHook struct {
	key           ctxKey
	sha, src      string
	beforeReached chan struct{}
	beforeGo      chan struct{}
	afterReached  chan struct{}
	afterGo       chan struct{}
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		match := ctx.Value(h.key) != nil && len(a) > 1 && (a[1] == h.sha || a[1] == h.src)
		if match && h.beforeGo != nil {
			close(h.beforeReached)
			<-h.beforeGo
		}
		err := next(ctx, cmd)
		if match && h.afterGo != nil {
			close(h.afterReached)
			<-h.afterGo
		}
		return err
	}
}

func testReply(peer int) Entry {
	return Entry{GroupID: 42, PeerID: peer, Message: "1", Queued: time.Now()}
}

// TestRecoveryLeavesWhatADrainHandsBack: a recovery that began before a
// Drain's read must not hand out an entry that read got past the horizon
// and hands back (it would be sent here and, re-added, by another
// instance).
func TestRecoveryLeavesWhatADrainHandsBack(t *testing.T) {
	tg := redistest.Open(t, redistest.Real)
	ctx := context.Background()
	o := New(tg.Client, Options{Prefix: redistest.Prefix(t), Consumer: "a"})
	defer o.Close()
	if err := o.Init(ctx, 42); err != nil {
		t.Fatal(err)
	}
	recoverScript.Load(ctx, tg.Client)
	releaseScript.Load(ctx, tg.Client)
	if err := o.Add(ctx, testReply(1)); err != nil {
		t.Fatal(err)
	}
	got, _, err := o.Drain(ctx, 42, 1) // horizon = r1
	if err != nil || len(got) != 1 {
		t.Fatalf("first drain %v %v", got, err)
	}
	if err := o.Add(ctx, testReply(2)); err != nil { // past the horizon
		t.Fatal(err)
	}
	ha := &gateHook{key: "A", sha: recoverScript.Hash(), src: recoverLua, beforeReached: make(chan struct{}), beforeGo: make(chan struct{})}
	hb := &gateHook{key: "B", sha: releaseScript.Hash(), src: releaseLua, beforeReached: make(chan struct{}), beforeGo: make(chan struct{})}
	tg.Client.AddHook(ha)
	tg.Client.AddHook(hb)

	type res struct {
		out []Entry
		err error
	}
	aDone, bDone := make(chan res, 1), make(chan res, 1)
	go func() {
		out, _, err := o.Drain(context.WithValue(ctx, ctxKey("A"), 1), 42, 10)
		aDone <- res{out, err}
	}()
	<-ha.beforeReached // worker A's recovery has begun (beginRead), its script not yet run
	go func() {
		out, _, err := o.Drain(context.WithValue(ctx, ctxKey("B"), 1), 42, 10)
		bDone <- res{out, err}
	}()
	<-hb.beforeReached // worker B read r2 past the horizon and is about to hand it back
	close(ha.beforeGo)
	ra := <-aDone
	close(hb.beforeGo)
	rb := <-bDone
	t.Logf("A drained %d: %+v (err %v); B drained %d (err %v)", len(ra.out), ra.out, ra.err, len(rb.out), rb.err)

	other := New(tg.Client, Options{Prefix: o.opts.Prefix, Consumer: "b"})
	defer other.Close()
	taken, err := other.Take(ctx, 42, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ra.out {
		for _, b := range taken {
			if a.PeerID == b.PeerID {
				t.Errorf("reply to peer %d handed out twice: by the draining instance (%s) and, handed back, to another (%s)", a.PeerID, a.ID, b.ID)
			}
		}
	}
}

// TestRecoveryLeavesWhatASiblingFinished: a recovery whose script runs
// after a concurrent read got an entry, and whose answer is decoded after
// that read's sender finished it (Done), must not hand it out again.
func TestRecoveryLeavesWhatASiblingFinished(t *testing.T) {
	tg := redistest.Open(t, redistest.Real)
	ctx := context.Background()
	o := New(tg.Client, Options{Prefix: redistest.Prefix(t), Consumer: "a"})
	defer o.Close()
	if err := o.Init(ctx, 42); err != nil {
		t.Fatal(err)
	}
	recoverScript.Load(ctx, tg.Client)
	o.community(42).handouts.noteLost(true) // a read failed earlier: the next Takes recover
	h := &gateHook{key: "A", sha: recoverScript.Hash(), src: recoverLua,
		beforeReached: make(chan struct{}), beforeGo: make(chan struct{}),
		afterReached: make(chan struct{}), afterGo: make(chan struct{})}
	tg.Client.AddHook(h)
	aDone := make(chan []Entry, 1)
	go func() {
		out, err := o.Take(context.WithValue(ctx, ctxKey("A"), 1), 42, 10, 0)
		if err != nil {
			t.Error(err)
		}
		aDone <- out
	}()
	<-h.beforeReached
	if err := o.Add(ctx, testReply(1)); err != nil {
		t.Fatal(err)
	}
	b, err := o.Take(ctx, 42, 10, 0)
	if err != nil || len(b) != 1 {
		t.Fatalf("worker B Take = %v %v", b, err)
	}
	close(h.beforeGo) // A's script runs now: r1 is pending, not in A's held snapshot
	<-h.afterReached
	if err := o.Done(ctx, 42, b[0].ID); err != nil { // B sent it
		t.Fatal(err)
	}
	close(h.afterGo)
	a := <-aDone
	if len(a) > 0 {
		t.Errorf("reply %s sent and done by worker B, then handed out again to worker A: %+v", b[0].ID, a)
	}
}

// The blocking-read connections must not retry by themselves, as every
// other client of the service (redisconn: MaxRetries -1).
func TestBlockerNeverRetries(t *testing.T) {
	for _, k := range []redistest.Kind{redistest.Real, redistest.Cluster} {
		tg := redistest.Open(t, k)
		c := tg.Client
		o := New(c, Options{Prefix: redistest.Prefix(t), Consumer: "a"})
		bc, err := o.blocker(context.Background(), 42)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: given client MaxRetries? blocker MaxRetries=%d", k, bc.Options().MaxRetries)
		if bc.Options().MaxRetries > 0 {
			t.Errorf("%s: blocker retries a failed XREADGROUP %d times", k, bc.Options().MaxRetries)
		}
		o.Close()
	}
}
