package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/vkcounter/vkcounter/vktest"
)

// post posts every event from o.Concurrency workers, at o.Rate, until all
// are posted or the time is up, and says why it stopped. Requests in flight
// when the time is up still finish.
func (r *callbackRun) post(ctx context.Context) string {
	limit, stopped := r.o.Duration, "duration"
	// Keep every text's events inside the window, with a margin for
	// clock steps and the time a request spends in the bot.
	if w := r.window - max(2*time.Second, r.window/10); w > 0 && (limit == 0 || w < limit) {
		limit, stopped = w, "window"
	}
	if limit == 0 {
		limit = 1<<63 - 1
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()

	jobs := make(chan *event)
	var wg sync.WaitGroup
	work, workers := r.postEvent, r.o.Concurrency
	if r.o.LongPoll {
		// One worker queues the events in order, as VK numbers them.
		r.startAcks(ctx)
		work, workers = r.queueEvent, 1
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				work(ctx, e)
			}
		}()
	}
	defer wg.Wait()
	defer close(jobs)
	for i, e := range r.events {
		var due <-chan time.Time
		if r.o.Rate > 0 {
			if wait := time.Until(r.start.Add(time.Duration(float64(i) / r.o.Rate * 1e9))); wait > 0 {
				due = time.After(wait)
			}
		}
		if due != nil {
			select {
			case <-due:
			case <-timer.C:
				return stopped
			case <-ctx.Done():
				return "interrupted"
			}
		}
		select {
		case jobs <- e:
			r.next.Store(int64(i + 1))
		case <-timer.C:
			return stopped
		case <-ctx.Done():
			return "interrupted"
		}
	}
	return "done"
}

// upcomingPeers returns the distinct conversations of the next events to
// be posted, at most n.
func (r *callbackRun) upcomingPeers(n int) []int {
	var out []int
	seen := map[int]bool{}
	for i := int(r.next.Load()); i < len(r.events) && len(out) < n; i++ {
		if p := r.events[i].peer; !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// postEvent posts e until it is answered "ok", then re-posts it if it is
// one of the RetryFraction.
func (r *callbackRun) postEvent(ctx context.Context, e *event) {
	defer r.posted.Add(1)
	e.start = time.Now()
	body := r.body(e)
	e.state = r.deliver(ctx, body, 0)
	if e.state != counted {
		return
	}
	e.acked = time.Now()
	if picked(e.seq, r.o.RetryFraction) {
		r.reposts.Add(1)
		r.deliver(ctx, body, 1)
	}
}

// deliver posts body until the bot answers "ok", at most MaxAttempts
// times, each retry with the next X-Retry-Counter. As VK does, it waits the
// Retry-After of a refusal (at most maxRetryAfter) before the next
// attempt, else a short backoff.
func (r *callbackRun) deliver(ctx context.Context, body []byte, retry int) eventState {
	backoff := 50 * time.Millisecond
	for attempt := range r.o.MaxAttempts {
		begin := time.Now()
		status, answer, retryAfter, err := r.do(ctx, body, retry+attempt)
		r.webhook.record(begin, time.Since(begin))
		r.reqs.Add(1)
		switch {
		case err == nil && status == http.StatusOK && answer == "ok":
			return counted
		case ctx.Err() != nil:
			return interrupted
		case err != nil:
			r.addError("network")
		case status == http.StatusOK:
			r.addError(fmt.Sprintf("answer %.20q", answer))
		default:
			r.addError("HTTP " + strconv.Itoa(status))
		}
		if attempt == r.o.MaxAttempts-1 {
			break
		}
		wait := backoff
		if retryAfter > 0 {
			wait = min(retryAfter, maxRetryAfter)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return interrupted
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return failed
}

// do posts body once and returns the status, the start of the answer and
// its Retry-After (zero if none, or not in seconds).
func (r *callbackRun) do(ctx context.Context, body []byte, retry int) (int, string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if retry > 0 {
		req.Header.Set(headerRetryCounter, strconv.Itoa(retry))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, resp.Body) // let the connection be reused
	var retryAfter time.Duration
	if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
		retryAfter = time.Duration(secs) * time.Second
	}
	return resp.StatusCode, string(answer), retryAfter, err
}

func (r *callbackRun) addError(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[kind]++
}

func (r *callbackRun) errorCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, v := range r.errors {
		n += v
	}
	return n
}

// collect reads the sends the fake VK API accepts after the first baseline
// until stop is closed, then until every counted event has a reply or
// ReplyTimeout passes, then for a short while more to catch late
// duplicates. It returns them in arrival order.
func (r *callbackRun) collect(baseline int, stop <-chan struct{}) []vktest.Send {
	var sends []vktest.Send
	who := newAttributor(r.events)
	answered := map[*event]bool{}
	poll := func() int {
		fresh := r.o.VK.SendsFrom(baseline + len(sends))
		for _, s := range fresh {
			if e, _ := who.of(s); e != nil {
				answered[e] = true
			}
		}
		sends = append(sends, fresh...)
		r.replies.Store(int64(len(sends)))
		return len(fresh)
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			poll()
		case <-stop:
			running = false
		}
	}
	// Posting is over: every event's state is final and visible here.
	var waiting []*event
	for _, e := range r.events {
		if e.state == counted {
			waiting = append(waiting, e)
		}
	}
	deadline := time.Now().Add(r.o.ReplyTimeout)
	var quietSince time.Time
	for time.Now().Before(deadline) {
		if poll() > 0 {
			quietSince = time.Time{}
		}
		for len(waiting) > 0 && answered[waiting[0]] {
			waiting = waiting[1:]
		}
		if len(waiting) == 0 {
			if quietSince.IsZero() {
				quietSince = time.Now()
			} else if time.Since(quietSince) >= settle {
				break
			}
		}
		<-tick.C
	}
	poll()
	return sends
}
