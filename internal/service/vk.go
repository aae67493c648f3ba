package service

import (
	"context"

	"github.com/SevereCloud/vksdk/v2/api"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// callbackGroups returns the webhook's communities. In callback mode, a
// community with a token and no VK_CONFIRMATION follows VK's confirmation
// code: each confirmation event is answered with the code
// groups.getCallbackConfirmationCode gives then (VK changes it from time
// to time, and when a server's settings change), or, when VK does not
// answer within callback.ConfirmWait, the last code it gave. The code is
// fetched once at start too, as that fallback and to say early when the
// token cannot fetch it; a failure is logged, not fatal: the bot still
// counts and answers.
func (m *Main) callbackGroups(ctx context.Context, communities []config.Community) []callback.Group {
	groups := make([]callback.Group, 0, len(communities))
	for _, c := range communities {
		g := callback.Group{ID: c.GroupID, Secret: c.Secret, Confirmation: c.Confirmation}
		tokens := c.Tokens()
		if m.cfg.VKMode == config.ModeCallback && c.Confirmation == "" && len(tokens) > 0 {
			vk, group := m.vkAPI(tokens[0]), c.GroupID
			g.FetchConfirmation = func(ctx context.Context) (string, error) { return vkapi.Confirmation(ctx, vk, group) }
			code, err := g.FetchConfirmation(ctx)
			if err != nil {
				m.log.Warn().Err(err).Int("group_id", c.GroupID).
					Msg("cannot fetch the confirmation code: VK's confirmation request will be refused until VK gives it; set VK_CONFIRMATION or give the token the manage right")
			} else {
				g.Confirmation = code
				m.log.Info().Int("group_id", c.GroupID).Msg("confirmation code fetched from VK; each confirmation event asks VK again")
			}
		}
		groups = append(groups, g)
	}
	return groups
}

// vkAPI returns a VK API client for token, configured by VK_API_URL and
// VK_TIMEOUT.
func (m *Main) vkAPI(token string) *api.VK {
	return vkapi.New(token, vkapi.Options{MethodURL: m.cfg.VKAPIURL, Timeout: m.cfg.VKTimeout})
}

// quote is REPLY_QUOTE, checked by Config.validate.
func (m *Main) quote() bot.Quote {
	q, _ := bot.ParseQuote(m.cfg.ReplyQuote)
	return q
}

// pollersPart is VK_MODE=longpoll's pollers, one per community.
type pollersPart struct {
	pollers *longpoll.Group
	log     zerolog.Logger
}

// close stops the pollers within ctx.
func (p *pollersPart) close(ctx context.Context) error {
	if p.pollers != nil {
		// Within the shutdown deadline: a poller still waiting on a stalled
		// Redis stops on its own a little later and hands the bot nothing
		// more; should it not release its lease, the lease runs out.
		if err := p.pollers.Close(ctx); err != nil {
			p.log.Warn().Err(err).Msg("shutdown: a long-poll poller is still waiting on Redis")
		}
	}
	return nil
}

// openPollers starts (pollersPart), in longpoll mode, one poller per community feeding
// the bot. Of several instances sharing the Redis, one polls each
// community at a time (a lease in Redis); the others stand by.
func (m *Main) openPollers(communities []config.Community) (err error) {
	m.longpoll = &pollersPart{log: m.log}
	m.opened(m.longpoll)
	if m.cfg.VKMode != config.ModeLongPoll {
		return nil
	}
	store, err := longpoll.NewRedisStore(m.redis.rdb, m.cfg.KeyPrefix)
	if err != nil {
		return err
	}
	opts := make([]longpoll.Options, 0, len(communities))
	for _, c := range communities {
		opts = append(opts, longpoll.Options{
			GroupID: c.GroupID,
			API:     m.vkAPI(c.Tokens()[0]),
			Handler: m.bot.bot,
			Store:   store,
			Wait:    m.cfg.LongPollWait,
			Key:     func(msg callback.Message) string { return bot.TextKey(msg, m.cfg.Normalize) },
			Logger:  m.log,
		})
	}
	if m.longpoll.pollers, err = longpoll.Start(opts); err != nil {
		return err
	}
	m.metrics.ObservePollers(m.longpoll.pollers.Total)
	return nil
}
