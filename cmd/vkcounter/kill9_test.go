package main

import (
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/vktest"
)

// TestKill9UnderLoad kills the program with SIGKILL while it has replies in
// its outbox, restarts it on the same Redis, and re-posts what got no ok.
// Every event answered ok gets exactly one message.
func TestKill9UnderLoad(t *testing.T) {
	t.Parallel() // waits on VK's pace for a backlog: alongside the other waiting tests
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		vk := vktest.NewServer()
		defer vk.Close()
		vk.SetRateLimit(20)                 // VK's limit per token
		vk.SetDelay(100 * time.Millisecond) // and a slow VK: a backlog builds up
		env := map[string]string{
			"REDIS_URL": tg.URL, "KEY_PREFIX": redistest.Prefix(t),
			"VK_API_URL": vk.MethodURL(), "VK_TOKEN": "tok", "VK_GROUP_ID": strconv.Itoa(servicetest.Group),
			"VK_SECRET": servicetest.Secret, "VK_RATE": "20", "OUTBOX_CLAIM_AFTER": "1s"}
		first := startBinary(t, env)
		p := servicetest.NewPoster("http://" + first.HTTP + "/callback")

		const events = 600
		var wg sync.WaitGroup
		failed := make(chan int, events)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < events; i += 6 {
					if !p.Post(1+i, fmt.Sprintf("text %d", i%7), 0) {
						failed <- 1 + i
					}
				}
			}()
		}
		// Kill while events are being answered and replies wait.
		eventually.True(t, time.Minute, "a third of the events answered", func() bool { return p.Answered() >= events/3 })
		first.cmd.Process.Signal(syscall.SIGKILL)
		<-first.done
		wg.Wait()
		close(failed)
		delivered := len(vk.Messages())
		t.Logf("killed with %d events answered ok, %d messages delivered", p.Answered(), delivered)
		if delivered >= p.Answered() {
			t.Fatalf("no backlog at the kill (%d delivered of %d): the test proves nothing", delivered, p.Answered())
		}

		second := startBinary(t, env)
		p.URL = "http://" + second.HTTP + "/callback"
		for peer := range failed { // VK re-delivers what got no ok
			retry := 0
			eventually.True(t, 10*time.Second, fmt.Sprintf("event of peer %d answered ok", peer), func() bool {
				retry++
				return p.Post(peer, fmt.Sprintf("text %d", (peer-1)%7), retry)
			})
		}
		if p.Answered() != events {
			t.Fatalf("%d of %d events answered ok", p.Answered(), events)
		}
		p.CheckExactlyOnce(t, vk)
	}, redistest.Mini, redistest.Real)
}
