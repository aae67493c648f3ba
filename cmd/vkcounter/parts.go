package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot"
	"github.com/vkcounter/vkcounter/bot/longpoll"
	"github.com/vkcounter/vkcounter/bot/outbox"
	"github.com/vkcounter/vkcounter/callback"
	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/resource"
	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/embedredis"
	"github.com/vkcounter/vkcounter/internal/headroom"
	"github.com/vkcounter/vkcounter/internal/redisconn"
	"github.com/vkcounter/vkcounter/internal/toptexts"
)

// A part is one component of the service. Each holds what it opened (Redis
// clients, stores, listeners, workers) and closes all of it in close, which
// tolerates a part opened only half-way. Main lists its parts in the order
// they depend on one another, and Close closes them in reverse.
type part interface {
	close(ctx context.Context) error
}

// parts returns m's components in the order they are opened: each may use
// the ones before it, so Close closes them from the last.
func (m *Main) parts() []part {
	return []part{&m.redisPart, &m.countersPart, &m.botPart, &m.httpPart, &m.background}
}

// redisPart is the bot's Redis: the embedded one, or a client of REDIS_URL
// or REDIS_CLUSTER (redis.go opens it).
type redisPart struct {
	embedded *embedredis.Server // when no REDIS_URL / REDIS_CLUSTER
	rdb      redis.UniversalClient
	// writes sees the counting script refused while Redis answers (out of
	// memory, request quota, read-only); memRead is the
	// last readiness check's reading of the bot's Redis (writable.go).
	writes  redisconn.WriteWatch
	memRead atomic.Pointer[headroom.Reading]
	// serverRead is when readServer last read memRead and the evictions
	// (Unix nanoseconds; 0: never).
	serverRead atomic.Int64
	// evictions is the bot's Redis's eviction policy and the keys it
	// evicted since start (eviction.go).
	evictions evictionWatch
}

func (p *redisPart) close(context.Context) error {
	if p.rdb != nil {
		p.rdb.Close()
	}
	if p.embedded != nil {
		p.embedded.Close()
	}
	return nil
}

// countersPart is the counters' side: their Redis (their own, or the bot's
// borrowed), the headroom guard, the stores of COUNTERS_STORE, the resource
// store with RESOURCE_STORE=redis, and the counter port.
type countersPart struct {
	// cntRdb is the counters' Redis (COUNTERS_REDIS_URL or _CLUSTER, then
	// ownRdb), or the bot's when they share it; guard keeps the counter
	// stores from filling it (nil: COUNTERS_REDIS_HEADROOM=0, or the
	// embedded Redis).
	cntRdb redis.UniversalClient
	ownRdb bool
	guard  *headroom.Guard
	keyCap *participant.KeyCap // COUNTERS_PARTICIPANT_MAX_KEYS
	// resRdb is the resource store's own client (RESOURCE_STORE=redis):
	// the counters' Redis, with a larger pool.
	resRdb     redis.UniversalClient
	resources  *resource.Redis
	stores     counters.Stores   // access, participant, window and unique counters (COUNTERS_STORE)
	activity   counters.Activity // the bot's activity counters: stores, without the guard
	counterLn  net.Listener      // nil when COUNTER_ADDR=off
	counterSrv *counters.Server
	serving    sync.WaitGroup
}

// close closes the counter connections, which releases everything they
// hold, then the resource store and the counters' own Redis clients.
func (p *countersPart) close(context.Context) error {
	var err error
	if p.counterSrv != nil {
		if cerr := p.counterSrv.Close(); cerr != nil {
			err = fmt.Errorf("counter server: %w", cerr)
		}
	} else if p.counterLn != nil {
		p.counterLn.Close()
	}
	p.serving.Wait()
	if p.resources != nil {
		p.resources.Close()
	}
	if p.resRdb != nil {
		p.resRdb.Close()
	}
	if p.ownRdb {
		p.cntRdb.Close()
	}
	return err
}

// botPart is the bot's side: the count, the outbox, the bot with its
// senders and activity writer, and the long-poll pollers.
type botPart struct {
	store   *freq.Store
	outbox  *outbox.Outbox
	groups  []int // the communities served
	bot     *bot.Bot
	pollers *longpoll.Group // VK_MODE=longpoll
	top     *toptexts.Table // TOP_TEXTS; nil when 0
	// left says what a shutdown that did not drain the outbox leaves
	// behind (Main.leftInOutbox).
	left func(context.Context, error) error
	log  zerolog.Logger
}

// maxCountShare bounds the share of the shutdown kept, after the bot's
// drain, for reading how many replies are left in the outbox.
const maxCountShare = time.Second

// close stops the pollers within ctx, drains the bot's replies (what is
// not sent by then is handed back to the outbox) and closes the outbox.
func (p *botPart) close(ctx context.Context) error {
	var err error
	if p.pollers != nil {
		// Within the shutdown deadline: a poller still waiting on a stalled
		// Redis stops on its own a little later and hands the bot nothing
		// more; should it not release its lease, the lease runs out.
		if perr := p.pollers.Close(ctx); perr != nil {
			p.log.Warn().Err(perr).Msg("shutdown: a long-poll poller is still waiting on Redis")
		}
	}
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

// httpPart is the public HTTP server (the webhook, /counters/, /healthz)
// and the admin one (/metrics, /stats, /readyz, the status page).
type httpPart struct {
	webhook  *callback.Handler // its refusals by reason are read for /stats and /metrics
	httpLn   net.Listener
	httpSrv  *http.Server
	adminLn  net.Listener
	adminSrv *http.Server
	serving  sync.WaitGroup
}

// close stops accepting requests and waits, within ctx, for those under
// way to finish.
func (p *httpPart) close(ctx context.Context) error {
	var errs []error
	for _, srv := range []struct {
		s  *http.Server
		ln net.Listener
	}{{p.httpSrv, p.httpLn}, {p.adminSrv, p.adminLn}} {
		if srv.s != nil {
			if err := srv.s.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
		} else if srv.ln != nil {
			srv.ln.Close()
		}
	}
	p.serving.Wait()
	return errors.Join(errs...)
}

// background is the process's own workers: the soft memory limit following
// the live heap and the status page's history. They stop first.
type background struct {
	stops []context.CancelFunc
	wg    sync.WaitGroup
}

// start runs fn in a goroutine until close; fn returns when its context
// ends.
func (b *background) start(fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	b.stops = append(b.stops, cancel)
	b.wg.Go(func() { fn(ctx) })
}

func (b *background) close(context.Context) error {
	for _, stop := range b.stops {
		stop()
	}
	b.wg.Wait()
	return nil
}
