package main

import (
	"context"

	"github.com/SevereCloud/vksdk/v2/api"

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

// startPollers starts, in longpoll mode, one poller per community feeding
// the bot. Of several instances sharing the Redis, one polls each
// community at a time (a lease in Redis); the others stand by.
func (m *Main) startPollers(communities []config.Community) error {
	if m.cfg.VKMode != config.ModeLongPoll {
		return nil
	}
	store, err := longpoll.NewRedisStore(m.rdb, m.cfg.KeyPrefix)
	if err != nil {
		return err
	}
	opts := make([]longpoll.Options, 0, len(communities))
	for _, c := range communities {
		opts = append(opts, longpoll.Options{
			GroupID: c.GroupID,
			API:     m.vkAPI(c.Tokens()[0]),
			Handler: m.bot,
			Store:   store,
			Wait:    m.cfg.LongPollWait,
			Key:     func(msg callback.Message) string { return bot.TextKey(msg, m.cfg.Normalize) },
			Logger:  m.log,
		})
	}
	if m.pollers, err = longpoll.Start(opts); err != nil {
		return err
	}
	m.metrics.ObservePollers(m.pollers.Total)
	return nil
}
