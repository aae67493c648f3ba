package callback_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vkcounter/vkcounter/callback"
)

// fakeCode is a community's confirmation code at a fake VK that can
// change it, fail, or not answer until the caller gives up.
type fakeCode struct {
	calls atomic.Int64

	mu   sync.Mutex // guards code, err, hang
	code string
	err  error
	hang bool
}

func (f *fakeCode) set(code string, err error, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.code, f.err, f.hang = code, err, hang
}

func (f *fakeCode) fetch(ctx context.Context) (string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	code, err, hang := f.code, f.err, f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return code, err
}

// confirm posts a confirmation event for group 7 to h and returns the
// status, the body and how long the answer took on the bubble's clock.
func confirm(h http.Handler) (int, string, time.Duration) {
	start := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(`{"type":"confirmation","group_id":7,"secret":"s7"}`)))
	return w.Code, strings.TrimSpace(w.Body.String()), time.Since(start)
}

func followingHandler(t *testing.T, vk *fakeCode, known string) http.Handler {
	t.Helper()
	return mustHandler(t, &recorder{}, callback.Options{Groups: []callback.Group{
		{ID: 7, Secret: "s7", Confirmation: known, FetchConfirmation: vk.fetch}}})
}

// TestConfirmationFollowsVK: each confirmation event gets the code VK
// gives now; when VK hangs, the last code it gave, after ConfirmWait and
// not later; when it fails, the last code at once.
func TestConfirmationFollowsVK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vk := &fakeCode{code: "first"}
		h := followingHandler(t, vk, "at-start")
		if code, body, _ := confirm(h); code != 200 || body != "first" {
			t.Fatalf("VK gives %q: %d %q", "first", code, body)
		}
		vk.set("second", nil, false) // VK changed it while running
		if code, body, _ := confirm(h); code != 200 || body != "second" {
			t.Fatalf("VK changed the code to %q: the next event got %d %q", "second", code, body)
		}
		vk.set("third", nil, true) // VK hangs
		code, body, took := confirm(h)
		if code != 200 || body != "second" || took != callback.ConfirmWait {
			t.Fatalf("VK hanging: %d %q after %v; want the last code, %q, after exactly %v", code, body, took, "second", callback.ConfirmWait)
		}
		vk.set("", errors.New("access denied"), false)
		if code, body, took := confirm(h); code != 200 || body != "second" || took != 0 {
			t.Fatalf("VK refusing: %d %q after %v; want the last code at once", code, body, took)
		}
		vk.set("fourth", nil, false)
		time.Sleep(callback.ConfirmFetchEvery) // the burst is spent: VK is asked again once per ConfirmFetchEvery
		if code, body, _ := confirm(h); code != 200 || body != "fourth" {
			t.Fatalf("VK back: %d %q, want %q", code, body, "fourth")
		}
	})
}

// TestConfirmationWithoutKnownCode: the code given at start is answered
// while VK hangs; with none, VK hanging or failing is a 503 within
// ConfirmWait.
func TestConfirmationWithoutKnownCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vk := &fakeCode{hang: true}
		if code, body, took := confirm(followingHandler(t, vk, "at-start")); code != 200 || body != "at-start" || took != callback.ConfirmWait {
			t.Errorf("VK hanging, code known at start: %d %q after %v", code, body, took)
		}
		h := followingHandler(t, vk, "")
		if code, _, took := confirm(h); code != http.StatusServiceUnavailable || took != callback.ConfirmWait {
			t.Errorf("VK hanging, no code known: %d after %v; want 503 after %v", code, took, callback.ConfirmWait)
		}
		vk.set("", errors.New("access denied"), false)
		if code, _, _ := confirm(h); code != http.StatusServiceUnavailable {
			t.Errorf("VK refusing, no code known: %d, want 503", code)
		}
		vk.set("now", nil, false)
		if code, body, _ := confirm(h); code != 200 || body != "now" {
			t.Errorf("VK answering: %d %q", code, body)
		}
	})
}

// TestConfirmationFloodIsBounded: a flood of confirmation events asks VK
// one at a time, at most ConfirmFetchBurst times and then once per
// ConfirmFetchEvery, and every event is answered within ConfirmWait.
func TestConfirmationFloodIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vk := &fakeCode{code: "c", hang: true}
		h := followingHandler(t, vk, "known")
		var wg sync.WaitGroup
		var slow atomic.Int64
		for range 200 { // at once, while VK hangs: one call
			wg.Go(func() {
				if code, body, took := confirm(h); code != 200 || body != "known" || took > callback.ConfirmWait {
					slow.Add(1)
				}
			})
		}
		wg.Wait()
		if n := vk.calls.Load(); n != 1 || slow.Load() != 0 {
			t.Fatalf("200 events at once while VK hangs: %d calls (want 1), %d answered wrong or late", n, slow.Load())
		}

		vk.set("c", nil, false)
		const seconds = 60
		for range seconds * 100 { // 100 a second for a minute
			if code, body, _ := confirm(h); code != 200 || (body != "c" && body != "known") {
				t.Fatalf("flood: %d %q", code, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
		limit := int64(1 + callback.ConfirmFetchBurst + seconds*time.Second/callback.ConfirmFetchEvery)
		if n := vk.calls.Load(); n > limit {
			t.Errorf("6,000 events in a minute asked VK %d times, want at most %d", n, limit)
		}
		t.Logf("6,000 confirmation events in a minute: %d calls of VK", vk.calls.Load())
	})
}

func ExampleGroup_fetchConfirmation() {
	code := "abc123" // what groups.getCallbackConfirmationCode answers now
	h, _ := callback.NewHandler(callback.MessageHandlerFunc(func(context.Context, callback.Message) error { return nil }),
		callback.Options{Groups: []callback.Group{{ID: 1, Secret: "s",
			FetchConfirmation: func(ctx context.Context) (string, error) { return code, nil }}}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(`{"type":"confirmation","group_id":1,"secret":"s"}`)))
	fmt.Println(w.Body.String())
	// Output: abc123
}
