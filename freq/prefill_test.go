package freq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// TestPrefill: every identity gets n occurrences just out of the window,
// in the layout Count reads, which the next Count drops.
func TestPrefill(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		ctx := context.Background()
		s := newStore(t, tg, freq.Options{Window: time.Minute})
		ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
		if err := s.Prefill(ctx, slices.Values(ids), 3); err != nil {
			t.Fatal(err)
		}
		now := time.Now().Unix()
		for _, id := range ids {
			st := stateOf(t, tg, s, id)
			if st.Total != "3" || len(st.List) != 3 {
				t.Fatalf("%s: %+v, want 3 occurrences at 3 seconds", id, st)
			}
			if last := st.List[2]; last > fmt.Sprint(now-60) || last < fmt.Sprint(now-70) {
				t.Fatalf("%s: newest occurrence %s, want just out of the window (%d)", id, last, now-60)
			}
		}
		if r := countNow(t, s, "a", ""); r.Previous != 0 {
			t.Fatalf("after the prefill: %+v, want Previous 0", r)
		}
		if st := stateOf(t, tg, s, "a"); st.Total != "1" {
			t.Fatalf("the expired occurrences are left: %+v", st)
		}
	})
}

// TestPrefillFails: n below 1 writes nothing; a failing Redis stops the
// prefill with its error; so does the end of ctx.
func TestPrefillFails(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	s := newStore(t, tg, freq.Options{})
	ctx := context.Background()
	if err := s.Prefill(ctx, slices.Values([]string{"a"}), 0); !errors.Is(err, freq.ErrInvalid) {
		t.Fatalf("n 0: %v, want ErrInvalid", err)
	}
	if keys := tg.Mini.Keys(); len(keys) != 0 {
		t.Fatalf("n 0 wrote %v", keys)
	}
	// An endless supply of identities: only an error ends it.
	endless := func(yield func(string) bool) {
		for i := 0; yield(fmt.Sprint(i)); i++ {
		}
	}
	tg.Mini.SetError("LOADING Redis is loading the dataset in memory")
	err := s.Prefill(ctx, endless, 1)
	tg.Mini.SetError("")
	if err == nil || !strings.Contains(err.Error(), "LOADING") {
		t.Fatalf("failing Redis: %v, want its error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := s.Prefill(cctx, endless, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended ctx: %v, want context.Canceled", err)
	}
}
