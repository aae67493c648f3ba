package pace_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vkcounter/vkcounter/bot/pace"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// shared returns n paces of one token on tg, perSecond calls a second.
func shared(t *testing.T, tg *redistest.Target, n int, perSecond float64, probe time.Duration) []*pace.Shared {
	t.Helper()
	key := pace.Key(redistest.Prefix(t), "token")
	var out []*pace.Shared
	for range n {
		p, err := pace.NewShared(tg.Client, key, perSecond, probe, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestSharedSpacesTheFleetsCalls: two instances' slots for one token are
// spaced 1/rate apart plus the margin, whichever asks; an error 6 doubles
// the spacing for both.
func TestSharedSpacesTheFleetsCalls(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		ps := shared(t, tg, 2, 50, time.Second) // 21 ms apart
		start := time.Now()
		for i := range 20 {
			if s, err := ps[i%2].Wait(ctx); err != nil || s.Probe || !s.Paused.IsZero() {
				t.Fatalf("Wait = %+v, %v", s, err)
			}
		}
		// 20 slots: the first at once, 19 intervals of 21 ms after it.
		if took, least := time.Since(start), 19*time.Second*105/100/50; took < least {
			t.Errorf("20 slots in %v, want at least %v", took, least)
		}
		ps[0].Slow(ctx)
		start = time.Now()
		for i := range 5 {
			if _, err := ps[i%2].Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if took, least := time.Since(start), 4*2*time.Second*105/100/50*9/10; took < least {
			t.Errorf("5 slots after an error 6 in %v, want at least %v (twice the interval, less its recovery)", took, least)
		}
	}, redistest.Mini, redistest.Real)
}

// TestSharedPauseGivesOneProbe: after a captcha's pause, of two
// instances exactly one gets the probe; the other waits for its answer.
func TestSharedPauseGivesOneProbe(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		ps := shared(t, tg, 2, 20, 200*time.Millisecond)
		ps[0].Pause(ctx, 200*time.Millisecond)
		s, err := ps[1].Wait(ctx)
		if err != nil || s.Paused.IsZero() {
			t.Fatalf("Wait during the pause = %+v, %v; want Paused", s, err)
		}
		<-time.After(time.Until(s.Paused)) // the pause's span
		first, err := ps[1].Wait(ctx)
		if err != nil || !first.Probe {
			t.Fatalf("first Wait after the pause = %+v, %v; want the probe", first, err)
		}
		second, err := ps[0].Wait(ctx)
		if err != nil || second.Probe || second.Paused.IsZero() {
			t.Fatalf("second Wait while the probe is out = %+v, %v; want Paused", second, err)
		}
		ps[1].Resume(ctx)
		if s, err := ps[0].Wait(ctx); err != nil || s.Probe || !s.Paused.IsZero() {
			t.Fatalf("Wait after the probe went through = %+v, %v; want a slot", s, err)
		}
	}, redistest.Mini, redistest.Real)
}

// TestLocalPausesAndProbes: the one-process pace pauses and hands out
// one probe after the pause.
func TestLocalPausesAndProbes(t *testing.T) {
	ctx := context.Background()
	l := pace.NewLocal(1000)
	l.Pause(ctx, 50*time.Millisecond)
	s, err := l.Wait(ctx)
	if err != nil || s.Paused.IsZero() {
		t.Fatalf("Wait during the pause = %+v, %v", s, err)
	}
	<-time.After(time.Until(s.Paused))
	if s, err := l.Wait(ctx); err != nil || !s.Probe {
		t.Fatalf("Wait after the pause = %+v, %v; want the probe", s, err)
	}
	l.Resume(ctx)
	if s, err := l.Wait(ctx); err != nil || s.Probe {
		t.Fatalf("Wait after Resume = %+v, %v; want a plain slot", s, err)
	}
}
