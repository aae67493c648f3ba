package names_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/counters/access"
	"github.com/vkcounter/vkcounter/counters/internal/names"
	"github.com/vkcounter/vkcounter/counters/participant"
	"github.com/vkcounter/vkcounter/counters/unique"
	"github.com/vkcounter/vkcounter/counters/window"
	"github.com/vkcounter/vkcounter/counters/wire"
)

var errTest = errors.New("test: invalid name")

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		len     int
		wantErr string // "" for a valid name
	}{
		{"empty", 0, "test: invalid name: length 0, want 1 to 255 bytes"},
		{"one byte", 1, ""},
		{"MaxLen bytes", names.MaxLen, ""},
		{"MaxLen+1 bytes", names.MaxLen + 1, "test: invalid name: length 256, want 1 to 255 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := names.Check(strings.Repeat("n", tc.len), errTest)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check(len %d) = %v, want nil", tc.len, err)
				}
				return
			}
			if !errors.Is(err, errTest) || err.Error() != tc.wantErr {
				t.Fatalf("Check(len %d) = %v, want %q wrapping errTest", tc.len, err, tc.wantErr)
			}
		})
	}
}

// TestKinds checks that every counter kind has the shared rule: its limit
// is MaxLen, names of 1 and MaxLen bytes pass, and an empty name or one of
// MaxLen+1 bytes is refused with the kind's own ErrInvalidName and message.
func TestKinds(t *testing.T) {
	ctx := context.Background()
	kinds := []struct {
		kind     string
		maxLen   int
		invalid  error
		wantText string
		call     func(name string) error
	}{
		{"access", access.MaxNameLen, access.ErrInvalidName, "access: invalid counter name",
			func(name string) error {
				_, err := access.NewMemory(access.MemoryLimits{}).Total(ctx, name)
				return err
			}},
		{"participant", participant.MaxNameLen, participant.ErrInvalidName, "participant: invalid name",
			func(name string) error {
				_, err := participant.NewMemory(time.Now, participant.MemoryLimits{}).Active(ctx, name, 0)
				return err
			}},
		{"window", window.MaxNameLen, window.ErrInvalidName, "window: invalid counter name",
			func(name string) error {
				_, err := window.NewMemory(time.Now, window.MemoryLimits{}).Count(ctx, name, time.Second)
				return err
			}},
		{"unique", unique.MaxNameLen, unique.ErrInvalidName, "unique: invalid counter name",
			func(name string) error {
				_, err := unique.NewMemory(unique.MemoryLimits{}).Count(ctx, name)
				return err
			}},
		// The client's checks before sending: the same rule.
		{"wire name", wire.MaxFieldLen, wire.ErrInvalid, "invalid arguments: name", wire.CheckKindName},
		{"wire key", wire.MaxFieldLen, wire.ErrInvalid, "invalid arguments: key", wire.CheckKey},
	}
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			if k.maxLen != names.MaxLen {
				t.Errorf("MaxNameLen = %d, want names.MaxLen (%d)", k.maxLen, names.MaxLen)
			}
			for _, n := range []int{1, names.MaxLen} {
				if err := k.call(strings.Repeat("n", n)); errors.Is(err, k.invalid) {
					t.Errorf("a name of %d bytes: %v, want it accepted", n, err)
				}
			}
			for _, n := range []int{0, names.MaxLen + 1} {
				err := k.call(strings.Repeat("n", n))
				want := fmt.Sprintf("%s: length %d, want 1 to 255 bytes", k.wantText, n)
				if !errors.Is(err, k.invalid) || err.Error() != want {
					t.Errorf("a name of %d bytes: %v, want %q wrapping ErrInvalidName", n, err, want)
				}
			}
		})
	}
}
