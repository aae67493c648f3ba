package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// A bot that answers the webhook is not yet one the run can check: in
// dry-run (no VK_TOKEN) it logs its replies, and with another VK_API_URL it
// sends them elsewhere; either way every answer of the run would be
// missing. So before the run the tool posts one probe message and waits
// for its reply at the fake VK API.

// probePeer is the user the probe message comes from, below every
// simulated user (userBase…), so its reply is never taken for a run's.
const probePeer = userBase - 1

// minProbeWait is the least time the probe's reply is waited for, however
// little of -wait is left: the bot's reply goes through its outbox and
// sender, which take a moment even when all is well.
const minProbeWait = 5 * time.Second

// waitWired posts the probe message and waits until the bot's reply to it
// reaches the fake VK API, until deadline (and at least minProbeWait).
// Without the reply, the error says why as far as the bot's /stats tells
// (dry-run), or that the bot sends its replies elsewhere.
func (r *callbackRun) waitWired(ctx context.Context, deadline time.Time) error {
	deadline = later(deadline, time.Now().Add(minProbeWait))
	from := len(r.o.VK.SendsFrom(0))
	// The message of a run's probe is its own (the bot answers a message
	// once, by its conversation message id): an id from the run's id.
	id, _ := strconv.ParseInt(r.runID, 16, 64)
	id = id%(1<<30) + 1
	body, _ := json.Marshal(map[string]any{
		"type": "message_new", "group_id": r.o.GroupID, "event_id": "loadtest-probe-" + r.runID, "v": vkapi.Version, "secret": r.o.Secret,
		"object": map[string]any{"message": map[string]any{
			"id": id, "date": time.Now().Unix(), "peer_id": probePeer, "from_id": probePeer, "conversation_message_id": id,
			"text": "vkcounter loadtest probe " + r.runID, "attachments": []any{}, "out": 0,
		}},
	})
	posted := false
	for {
		if !posted {
			status, answer, _, err := r.do(ctx, body, 0)
			posted = err == nil && status == http.StatusOK && answer == "ok"
		}
		for _, s := range r.o.VK.SendsFrom(from) {
			if s.PeerID == probePeer {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return r.notWired(ctx, posted)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notWired is the error of a bot that answers the webhook but whose reply
// to the probe never reached the fake VK API.
func (r *callbackRun) notWired(ctx context.Context, posted bool) error {
	vk := r.o.VK.MethodURL()
	if !posted {
		return fmt.Errorf("the bot at %s answered a probe but not the probe message: it does not count messages (is its Redis up?)", r.o.URL)
	}
	if stats := r.statsURL(); stats != "" {
		if dry, err := r.askDryRun(ctx, stats); err == nil && dry {
			return fmt.Errorf("the bot at %s answers, but it is in dry-run (its /stats says dry_run: it has no VK_TOKEN): it logs its replies and never calls the fake VK API at %s, so every answer would be missing; start the bot with the settings printed above", r.o.URL, vk)
		}
	}
	return fmt.Errorf("the bot at %s answers, but its reply to a probe message never reached the fake VK API at %s: it sends its replies elsewhere (another VK_API_URL?) or cannot send them; start the bot with the settings printed above", r.o.URL, vk)
}

// askDryRun reads service.dry_run from the bot's /stats.
func (r *callbackRun) askDryRun(ctx context.Context, statsURL string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return false, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var stats struct {
		Service struct {
			DryRun *bool `json:"dry_run"`
		} `json:"service"`
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: %s", statsURL, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || stats.Service.DryRun == nil {
		return false, fmt.Errorf("%s: no service.dry_run", statsURL)
	}
	return *stats.Service.DryRun, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
