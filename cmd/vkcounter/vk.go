package main

import (
	"context"

	"github.com/vkcounter/vkcounter/vkapi"
)

// fetchConfirmations fills in the confirmation string of every community
// that has a token and none configured, from
// groups.getCallbackConfirmationCode. A failure is logged, not fatal: the
// bot still counts and answers, and only the confirmation event is refused
// until a restart fetches the code or VK_CONFIRMATION gives it.
func (m *Main) fetchConfirmations(ctx context.Context, communities []Community) {
	for i, c := range communities {
		tokens := c.Tokens()
		if c.Confirmation != "" || len(tokens) == 0 {
			continue
		}
		vk := vkapi.New(tokens[0], vkapi.Options{MethodURL: m.cfg.VKAPIURL, Timeout: m.cfg.VKTimeout})
		code, err := vkapi.Confirmation(ctx, vk, c.GroupID)
		if err != nil {
			m.log.Warn().Err(err).Int("group_id", c.GroupID).
				Msg("cannot fetch the confirmation code: VK's confirmation request will be refused; set VK_CONFIRMATION or give the token the manage right")
			continue
		}
		communities[i].Confirmation = code
		m.log.Info().Int("group_id", c.GroupID).Msg("confirmation code fetched from VK")
	}
}
