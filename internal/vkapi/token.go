package vkapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/SevereCloud/vksdk/v2/api"
)

// MessagesRight is the messages permission bit of a community token's
// permissions mask (groups.getTokenPermissions).
const MessagesRight = 1 << 12

// ErrTokenRefused is wrapped by CheckToken's error when VK answered and
// the token cannot send replies: VK refused it, or it lacks the messages
// right. Any other error (VK unreachable, overloaded) says nothing about
// the token.
var ErrTokenRefused = errors.New("VK refuses the token")

// CheckToken asks VK whether the token is valid and has the messages right
// (groups.getTokenPermissions).
func CheckToken(ctx context.Context, vk *api.VK) error {
	r, err := vk.GroupsGetTokenPermissions(api.Params{}.WithContext(ctx))
	var apiErr *api.Error
	switch {
	case errors.As(err, &apiErr) && !transient(int(apiErr.Code)):
		return fmt.Errorf("%w: groups.getTokenPermissions: %v", ErrTokenRefused, err)
	case err != nil:
		return fmt.Errorf("groups.getTokenPermissions: %w", err)
	case r.Mask&MessagesRight == 0:
		return fmt.Errorf("%w: it lacks the messages right (permissions mask %d)", ErrTokenRefused, r.Mask)
	}
	return nil
}

// transient reports whether a VK error code says nothing about the call
// itself: too many requests (6), flood control (9), an internal error (10).
func transient(code int) bool { return code == 6 || code == 9 || code == 10 }
