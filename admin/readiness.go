package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// CheckTimeout bounds one reading of the readiness (Readiness.Check, and
// /readyz's Refresh and Check together).
const CheckTimeout = time.Second

// Readiness is the service's one reading of whether it can take traffic,
// for /readyz, the status page and the readiness metrics. Each check
// returns nil while all is well; a nil check is not made.
type Readiness struct {
	// Redis says why Redis does not answer (nil: it does).
	Redis func(ctx context.Context) error
	// Slots names a cluster's slot ranges that cannot be reached.
	Slots func(ctx context.Context) error
	// Server are made while Redis answers: it refuses writes, it
	// evicted keys.
	Server []func() error
	// VK says why VK does not take the replies: a token refused (or not
	// yet accepted, when one is required). A VK outage is not one: the
	// outbox keeps the replies until VK is back.
	VK func() error
	// Refresh reads, before /readyz checks, what is due of the server's
	// state (its memory, its evictions), within the same second.
	Refresh func(ctx context.Context)
}

// Check returns every reason the service cannot take traffic (none: it
// is ready), each prefixed by what it is about (redis, redis cluster,
// vk), and why Redis does not answer (nil: it does), within CheckTimeout.
func (r *Readiness) Check(ctx context.Context) (reasons []error, redisErr error) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	if r.Redis != nil {
		redisErr = r.Redis(ctx)
	}
	if redisErr != nil {
		reasons = append(reasons, fmt.Errorf("redis: %w", redisErr))
	}
	if r.Slots != nil {
		if err := r.Slots(ctx); err != nil {
			reasons = append(reasons, fmt.Errorf("redis cluster: %w", err))
		}
	}
	if redisErr == nil {
		for _, check := range r.Server {
			if err := check(); err != nil {
				reasons = append(reasons, fmt.Errorf("redis: %w", err))
			}
		}
	}
	if r.VK != nil {
		if err := r.VK(); err != nil {
			reasons = append(reasons, fmt.Errorf("vk: %w", err))
		}
	}
	return reasons, redisErr
}

// Ready returns why the service cannot take traffic, every reason of
// Check one per line, after Refresh; nil when it is ready. Both run
// within CheckTimeout.
func (r *Readiness) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout) // one second for both
	defer cancel()
	if r.Refresh != nil {
		r.Refresh(ctx)
	}
	reasons, _ := r.Check(ctx)
	return errors.Join(reasons...)
}

// readyz serves /readyz: "ready", or 503 with every reason.
func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if err := a.ready.Ready(r.Context()); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}
