// Package vkapi builds vksdk's API client for the version the service
// speaks and holds the community methods the service calls besides
// messages.send: the Callback server setup (Setup), the confirmation code
// (Confirmation) and the Bots Long Poll server (LongPollServer).
//
// vksdk v2.17.0 was written for API 5.131. Every call here is checked
// against the shapes of Version: where a vksdk response type fits, it is
// used; where it does not (groups.getById answers {"groups", "profiles"}
// from 5.194 on, while vksdk decodes a bare list), the response is decoded
// here. vksdk's callback.AutoSetting is not used: it calls groups.getById
// first, deletes servers whose status is not "ok", and sets api_version
// 5.131.
package vkapi

import (
	"net/http"
	"time"

	"github.com/SevereCloud/vksdk/v2/api"
)

// Version is the VK API version the service speaks (vksdk defaults to 5.131).
const Version = "5.199"

// DefaultTimeout bounds one API call when Options.Timeout is zero (vksdk's
// own client has no timeout).
const DefaultTimeout = 10 * time.Second

// DefaultMethodURL is the real VK API's base URL, vksdk's
// (Options.MethodURL when it is empty).
const DefaultMethodURL = api.MethodURL

// Options configure a client. Zero fields mean the defaults.
type Options struct {
	// MethodURL is the API base URL ending in "/method/"; "" means the
	// real VK API.
	MethodURL string
	// Timeout bounds each HTTP call (default DefaultTimeout).
	Timeout time.Duration
}

// New returns a vksdk client for token speaking Version, with a timeout
// and without vksdk's limiter: callers pace and retry themselves, while
// vksdk's limiter retries error 6 at once.
func New(token string, opts Options) *api.VK {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	vk := api.NewVK(token)
	vk.Version = Version
	vk.Limit = 0
	vk.Client = &http.Client{Timeout: opts.Timeout}
	if opts.MethodURL != "" {
		vk.MethodURL = opts.MethodURL
	}
	return vk
}
