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
// the token cannot send replies: VK refused it (error 5, authorization
// failed), or it lacks the messages right. Any other error (VK
// unreachable, overloaded, an unknown error) says nothing about the token.
var ErrTokenRefused = errors.New("VK refuses the token")

// errAuthFailed is VK's "User authorization failed": the token is invalid
// or revoked.
const errAuthFailed = 5

// CheckToken asks VK whether the token is valid and has the messages right
// (groups.getTokenPermissions). Only a definite refusal wraps
// ErrTokenRefused; VK's own error, if any, is wrapped too.
func CheckToken(ctx context.Context, vk *api.VK) error {
	r, err := vk.GroupsGetTokenPermissions(api.Params{}.WithContext(ctx))
	var apiErr *api.Error
	switch {
	case errors.As(err, &apiErr) && int(apiErr.Code) == errAuthFailed:
		return fmt.Errorf("%w: groups.getTokenPermissions: %w", ErrTokenRefused, err)
	case err != nil:
		return fmt.Errorf("groups.getTokenPermissions: %w", err)
	case r.Mask&MessagesRight == 0:
		return fmt.Errorf("%w: it lacks the messages right (permissions mask %d)", ErrTokenRefused, r.Mask)
	}
	return nil
}
