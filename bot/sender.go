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

// VKOptions configure a VKSender. Zero fields mean the defaults.
type VKOptions struct {
	// MethodURL is the API base URL; "" means the real VK API.
	MethodURL string
	// Timeout bounds each HTTP call (default 10s; vksdk's client has none).
	Timeout time.Duration
	// OnCall, if set, is called after every API call with its method,
	// its error (nil on success) and how long it took.
	OnCall func(method string, err error, took time.Duration)
}

// VKSender sends replies with vksdk's messages.send through one token.
type VKSender struct {
	vk     *api.VK
	onCall func(method string, err error, took time.Duration)
}

var _ Sender = (*VKSender)(nil)

// NewVKSender returns a Sender for token.
func NewVKSender(token string, opts VKOptions) *VKSender {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	vk := api.NewVK(token)
	vk.Version = APIVersion
	vk.Limit = 0 // we pace and retry ourselves; the SDK's limiter retries error 6 at once
	vk.Client = &http.Client{Timeout: opts.Timeout}
	if opts.MethodURL != "" {
		vk.MethodURL = opts.MethodURL
	}
	return &VKSender{vk: vk, onCall: opts.OnCall}
}

// Send sends each reply with messages.send.
func (s *VKSender) Send(ctx context.Context, replies []Reply) []error {
	errs := make([]error, len(replies))
	for i, r := range replies {
		start := time.Now()
		_, errs[i] = s.vk.MessagesSend(api.Params{
			"peer_id":   r.PeerID,
			"message":   r.Message,
			"random_id": r.RandomID,
		}.WithContext(ctx))
		if s.onCall != nil {
			s.onCall("messages.send", errs[i], time.Since(start))
		}
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
