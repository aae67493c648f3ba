package bot

import (
	"context"
	"net/http"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
	"github.com/rs/zerolog"
)

// APIVersion is the VK API version the bot speaks (vksdk defaults to 5.131).
const APIVersion = "5.199"

// A Reply is one answer waiting to be sent.
type Reply struct {
	GroupID  int
	PeerID   int
	Message  string
	RandomID int32
	EventID  string
	// Queued is when the reply entered the queue.
	Queued time.Time
}

// A Sender delivers replies through one VK token. Send returns one error per
// reply, in order; a nil entry means VK accepted that reply.
type Sender interface {
	Send(ctx context.Context, replies []Reply) []error
}

// SenderFunc adapts a function to a Sender.
type SenderFunc func(ctx context.Context, replies []Reply) []error

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, replies []Reply) []error { return f(ctx, replies) }

// VKSender sends replies with vksdk's messages.send through one token.
type VKSender struct {
	vk *api.VK
}

var _ Sender = (*VKSender)(nil)

// NewVKSender returns a Sender for token. methodURL "" means the real VK
// API; timeout bounds each HTTP call (vksdk's default client has none).
func NewVKSender(token, methodURL string, timeout time.Duration) *VKSender {
	vk := api.NewVK(token)
	vk.Version = APIVersion
	vk.Limit = 0 // we pace and retry ourselves; the SDK's limiter retries error 6 at once
	vk.Client = &http.Client{Timeout: timeout}
	if methodURL != "" {
		vk.MethodURL = methodURL
	}
	return &VKSender{vk: vk}
}

// Send sends each reply with messages.send.
func (s *VKSender) Send(ctx context.Context, replies []Reply) []error {
	errs := make([]error, len(replies))
	for i, r := range replies {
		_, errs[i] = s.vk.MessagesSend(api.Params{
			"peer_id":   r.PeerID,
			"message":   r.Message,
			"random_id": r.RandomID,
		}.WithContext(ctx))
	}
	return errs
}

// DryRun returns a Sender that logs each reply instead of sending it.
func DryRun(log zerolog.Logger) Sender {
	return SenderFunc(func(_ context.Context, replies []Reply) []error {
		for _, r := range replies {
			log.Info().Int("group_id", r.GroupID).Int("peer_id", r.PeerID).
				Int32("random_id", r.RandomID).Str("reply", r.Message).Msg("reply (dry-run, not sent)")
		}
		return make([]error, len(replies))
	})
}
