package main

import (
	"context"

	"github.com/SevereCloud/vksdk/v2/api"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

// fetchConfirmations fills in, in callback mode, the confirmation string of
// every community that has a token and none configured, from
// groups.getCallbackConfirmationCode. A failure is logged, not fatal: the
// bot still counts and answers, and only the confirmation event is refused
// until a restart fetches the code or VK_CONFIRMATION gives it.
func (m *Main) fetchConfirmations(ctx context.Context, communities []Community) {
	if m.cfg.VKMode != ModeCallback {
		return
	}
	for i, c := range communities {
		tokens := c.Tokens()
		if c.Confirmation != "" || len(tokens) == 0 {
			continue
		}
		code, err := vkapi.Confirmation(ctx, m.vkAPI(tokens[0]), c.GroupID)
		if err != nil {
			m.log.Warn().Err(err).Int("group_id", c.GroupID).
				Msg("cannot fetch the confirmation code: VK's confirmation request will be refused; set VK_CONFIRMATION or give the token the manage right")
			continue
		}
		communities[i].Confirmation = code
		m.log.Info().Int("group_id", c.GroupID).Msg("confirmation code fetched from VK")
	}
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
func (m *Main) startPollers(communities []Community) error {
	if m.cfg.VKMode != ModeLongPoll {
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
