package service

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/bot/pace"
	"github.com/vkcounter/vkcounter/bot/tokens"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/toptexts"
)

// botPart is the bot's side: the count, the outbox, the bot with its
// senders and activity writer.
type botPart struct {
	store  *freq.Store
	outbox *outbox.Outbox
	groups []int // the communities served
	bot    *bot.Bot
	top    *toptexts.Table // TOP_TEXTS; nil when 0
	// left says what a shutdown that did not drain the outbox leaves
	// behind (Main.leftInOutbox).
	left func(context.Context, error) error
	log  zerolog.Logger
}

// maxCountShare bounds the share of the shutdown kept, after the bot's
// drain, for reading how many replies are left in the outbox.
const maxCountShare = time.Second

// close drains the bot's replies (what is
// not sent by then is handed back to the outbox) and closes the outbox.
func (p *botPart) close(ctx context.Context) error {
	var err error
	if p.bot != nil {
		// The count of the replies left is read within the shutdown too:
		// the bot's drain ends a share of it earlier.
		bctx, cancel := ctx, context.CancelFunc(func() {})
		if d, ok := ctx.Deadline(); ok {
			bctx, cancel = context.WithDeadline(ctx, d.Add(-min(time.Until(d)/10, maxCountShare)))
		}
		berr := p.bot.Close(bctx)
		cancel()
		if berr != nil {
			err = p.left(ctx, berr)
		}
	}
	if p.outbox != nil {
		p.outbox.Close()
	}
	return err
}

// openBot opens the bot's side (botPart): the count, the outbox of every
// community (whose Init loads the count's scripts), and the bot.
func (m *Main) openBot(ctx context.Context, communities []config.Community) (err error) {
	m.bot = &botPart{log: m.log, left: m.leftInOutbox}
	m.opened(m.bot)
	if m.bot.store, err = freq.New(m.redis.rdb, freq.Options{Window: m.cfg.Window, Prefix: m.cfg.KeyPrefix,
		Cluster: m.cfg.RedisCluster != ""}); err != nil {
		return err
	}
	m.bot.outbox = outbox.New(m.redis.rdb, outbox.Options{Prefix: m.cfg.KeyPrefix, MaxLen: int64(m.cfg.OutboxMaxLen),
		ClaimAfter: m.cfg.ClaimAfter, LaterIdle: maxPoll, Store: m.bot.store, Logger: m.log})
	for _, c := range communities {
		m.bot.groups = append(m.bot.groups, c.GroupID)
	}
	// Init loads the counting scripts (freq.Store.Load).
	if err := m.bot.outbox.Init(ctx, m.bot.groups...); err != nil {
		return err
	}
	if m.cfg.RedisURL != "" && !m.bot.store.Functions() {
		m.log.Info().Msg("Redis does not run functions for this user (before Redis 7, or an ACL without FCALL and FUNCTION): the counting scripts run with EVALSHA, and a message costs Redis about 10 % more")
	}
	m.bot.bot, err = m.newBot(communities)
	return err
}

func (m *Main) newBot(communities []config.Community) (*bot.Bot, error) {
	groups := make([]bot.Group, 0, len(communities))
	for _, c := range communities {
		g := bot.Group{ID: c.GroupID}
		for _, t := range c.Tokens() {
			g.Senders = append(g.Senders, bot.NewVKSender(t, bot.VKOptions{MethodURL: m.cfg.VKAPIURL, Timeout: m.cfg.VKTimeout, OnCall: m.metrics.VKCall}))
			// Every instance sending with the token shares its pace.
			p, err := pace.NewShared(m.redis.rdb, pace.Key(m.cfg.KeyPrefix, t), m.cfg.VKRate, bot.DefaultCaptchaProbe, m.log)
			if err != nil {
				return nil, err
			}
			g.Paces = append(g.Paces, p)
		}
		if len(g.Senders) == 0 {
			g.Senders = []bot.Sender{bot.DryRun(m.log)}
		}
		groups = append(groups, g)
	}
	rec, err := m.openTopTexts(m.bot.outbox)
	if err != nil {
		return nil, err
	}
	return bot.New(m.metrics.Recorder(rec), m.bot.outbox, groups, bot.Options{
		Poll:            maxPoll,
		Normalize:       m.cfg.Normalize,
		Quote:           m.quote(),
		MaxBatch:        m.cfg.VKBatch,
		RatePerToken:    m.cfg.VKRate,
		ClaimAfter:      m.cfg.ClaimAfter, // the outbox's: the senders read ahead within it
		OnReplyDone:     m.metrics.ReplyDone,
		Activity:        m.counters.activity,
		ActivityTimeout: m.cfg.CountersTimeout,
		RecordTimeout:   m.cfg.RedisTimeout,
		Tokens:          &tokens.Options{Required: m.cfg.RequireVKToken},
		Logger:          m.log,
	})
}
