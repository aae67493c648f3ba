package bot_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
)

// TestDryRunIsNotSent: in dry-run a reply is logged and leaves the outbox
// with its own result, never counted as sent or delivered.
func TestDryRunIsNotSent(t *testing.T) {
	var log bytes.Buffer // read once the bot is closed
	var mu sync.Mutex
	var classes []bot.Class
	opts := fastOptions()
	opts.OnReplyDone = func(c bot.Class, _ time.Duration) {
		mu.Lock()
		classes = append(classes, c)
		mu.Unlock()
	}
	o := newOutbox(t, outbox.Options{Counter: newMemCounter()})
	b, err := bot.New(o, o, []bot.Group{{ID: 7, Senders: []bot.Sender{bot.DryRun(zerolog.New(zerolog.SyncWriter(&log)))}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.HandleMessage(context.Background(), msg(1, "hello")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.Sent != 0 || st.DryRun != 1 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 1 dry-run reply and none sent", st)
	}
	if n := b.ConsecutiveVKFailures(); n != 0 {
		t.Errorf("%d consecutive VK failures in dry-run, want 0: nothing was asked of VK", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(classes) != 1 || classes[0] != bot.Logged || classes[0].String() != "dry_run" {
		t.Fatalf("OnReplyDone classes %v, want [dry_run]", classes)
	}
	if !strings.Contains(log.String(), `"reply":"0","message":"reply (dry-run, not sent)"`) {
		t.Fatalf("no dry-run line in %s", log.String())
	}
}
