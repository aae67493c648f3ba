package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestSnapshotRestoredUnderTheFleet: two instances on one Redis; the
// outbox drained, Redis saves a snapshot, 100 replies go out, and Redis
// comes back from the snapshot (killed, restarted from its file: a backup
// restored), as a promoted replica that missed the last writes would. The
// community's random_id sequence is back where the snapshot left it, but
// the instances saw the ids given out since: 0 of 100 new replies are
// swallowed by VK as repeats.
func TestSnapshotRestoredUnderTheFleet(t *testing.T) {
	dir := t.TempDir()
	tg := redistest.OwnServer(t, "--dir", dir)
	a := startApp(t, tg, nil)
	b := startApp(t, tg, map[string]string{"VK_API_URL": a.VK.MethodURL(), "KEY_PREFIX": a.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// post sends n messages, half to each instance, of peers peers+1 to
	// peers+10, numbered from cmid on, each until it is answered ok (after
	// the restart, an instance's first calls meet connections Redis
	// closed). The peers after the restore are others, so that a reply
	// repeating an id is not the reply sent with it before.
	sent := 0
	post := func(n, cmid, peers int) {
		t.Helper()
		for i := range n {
			app := a
			if i%2 == 1 {
				app = b
			}
			ev := event(fmt.Sprint("e", cmid+i), peers+1+i%10, cmid+i, fmt.Sprint("text ", cmid+i))
			eventually.True(t, 10*time.Second, "the message answered ok", func() bool {
				code, body, _ := app.Post(t, ev, nil)
				return code == 200 && body == "ok"
			})
		}
		sent += n
		if _, err := a.VK.WaitSends(ctx, sent); err != nil {
			t.Fatal(err)
		}
	}
	post(10, 1, 1000)
	if err := tg.Client.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	post(100, 100, 1000)
	redistest.StopServer(t, tg.Addr)
	redistest.StartServerAt(t, tg.Addr, "--dir", dir)
	post(100, 1000, 2000)
	if sw := a.VK.Swallowed(); len(sw) != 0 {
		t.Fatalf("%d of 100 replies after the restore swallowed as repeats, the first: %+v", len(sw), sw[0])
	}
}
