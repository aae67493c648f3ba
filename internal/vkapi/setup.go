package vkapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"unicode/utf8"

	"github.com/SevereCloud/vksdk/v2/api"
)

// EventMessageNew is the one event type the bot needs.
const EventMessageNew = "message_new"

// DefaultTitle is the title a Callback server is registered under when
// SetupOptions.Title is empty.
const DefaultTitle = "vkcounter"

// MaxTitle is the longest Callback server title VK accepts, in characters.
const MaxTitle = 14

// SecretBytes is how many random bytes a generated secret holds; it is
// written as twice as many hex digits (VK accepts at most 50 characters).
const SecretBytes = 16

// SetupOptions say which Callback server Setup registers.
type SetupOptions struct {
	// GroupID is the community, > 0.
	GroupID int
	// URL is where VK posts events, an http(s) URL. A server of the
	// community with this URL is updated; if there is none, one is added.
	URL string
	// Title is the server's title in VK's settings (default DefaultTitle,
	// at most MaxTitle characters).
	Title string
	// Secret is the secret key VK sends with every event. Empty keeps the
	// secret of the server being updated, or generates one for a new
	// server.
	Secret string
}

// SetupResult is what Setup did.
type SetupResult struct {
	// ServerID is the Callback server's id in the community.
	ServerID int
	// Created is true when the server was added, false when it was updated.
	Created bool
	// Secret is the server's secret key.
	Secret string
	// SecretGenerated is true when Setup generated Secret.
	SecretGenerated bool
	// Confirmation is the string the service must answer the confirmation
	// event with.
	Confirmation string
	// Disabled are the event types Setup turned off.
	Disabled []string
}

// Validate checks opts without calling VK.
func (o *SetupOptions) Validate() error {
	var errs []error
	if o.GroupID <= 0 {
		errs = append(errs, fmt.Errorf("group id %d: must be positive", o.GroupID))
	}
	if u, err := url.Parse(o.URL); o.URL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("url %q: must be an http(s) URL such as https://example.com/callback", o.URL))
	}
	if n := utf8.RuneCountInString(o.Title); n > MaxTitle {
		errs = append(errs, fmt.Errorf("title %q: %d characters, VK accepts at most %d", o.Title, n, MaxTitle))
	}
	if len(o.Secret) > 50 {
		errs = append(errs, errors.New("secret: VK accepts at most 50 characters"))
	}
	return errors.Join(errs...)
}

// Setup registers or updates the community's Callback server for opts.URL
// so that VK sends message_new events only, in API version Version, with
// the secret key; it then fetches the confirmation code. Running it again
// with the same URL updates the same server: it is idempotent.
func Setup(ctx context.Context, vk *api.VK, opts SetupOptions) (SetupResult, error) {
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if err := opts.Validate(); err != nil {
		return SetupResult{}, err
	}
	var res SetupResult
	group := opts.GroupID
	list, err := vk.GroupsGetCallbackServers(api.Params{"group_id": group}.WithContext(ctx))
	if err != nil {
		return res, fmt.Errorf("groups.getCallbackServers: %w", err)
	}
	for _, s := range list.Items {
		if s.URL == opts.URL {
			res.ServerID = s.ID
			if opts.Secret == "" {
				opts.Secret = s.SecretKey
			}
			break
		}
	}
	if opts.Secret == "" {
		if opts.Secret, err = NewSecret(); err != nil {
			return res, err
		}
		res.SecretGenerated = true
	}
	res.Secret = opts.Secret
	server := api.Params{"group_id": group, "url": opts.URL, "title": opts.Title, "secret_key": opts.Secret}
	if res.ServerID == 0 {
		added, err := vk.GroupsAddCallbackServer(server.WithContext(ctx))
		if err != nil {
			return res, fmt.Errorf("groups.addCallbackServer: %w", err)
		}
		res.ServerID, res.Created = added.ServerID, true
	} else {
		server["server_id"] = res.ServerID
		if _, err := vk.GroupsEditCallbackServer(server.WithContext(ctx)); err != nil {
			return res, fmt.Errorf("groups.editCallbackServer: %w", err)
		}
	}
	if res.Disabled, err = setEvents(ctx, vk, group, res.ServerID); err != nil {
		return res, err
	}
	if res.Confirmation, err = Confirmation(ctx, vk, group); err != nil {
		return res, err
	}
	return res, nil
}

// setEvents sets the server's API version to Version and turns
// message_new on and every other event type VK lists off. It returns the
// types it turned off.
func setEvents(ctx context.Context, vk *api.VK, group, server int) ([]string, error) {
	// Decoded here rather than with vksdk's GroupsGetCallbackSettings: its
	// fixed struct of event types lags behind the API, and a type VK added
	// since would stay on.
	var current struct {
		Events map[string]json.RawMessage `json:"events"`
	}
	if err := vk.RequestUnmarshal("groups.getCallbackSettings", &current,
		api.Params{"group_id": group, "server_id": server}.WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("groups.getCallbackSettings: %w", err)
	}
	params := api.Params{"group_id": group, "server_id": server, "api_version": Version, EventMessageNew: 1}
	var disabled []string
	for name, on := range current.Events {
		if name == EventMessageNew {
			continue
		}
		params[name] = 0
		if string(on) != "0" && string(on) != "false" {
			disabled = append(disabled, name)
		}
	}
	if _, err := vk.GroupsSetCallbackSettings(params.WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("groups.setCallbackSettings: %w", err)
	}
	sort.Strings(disabled)
	return disabled, nil
}

// Confirmation returns the string the community's Callback server must
// answer the confirmation event with (groups.getCallbackConfirmationCode).
func Confirmation(ctx context.Context, vk *api.VK, group int) (string, error) {
	code, err := vk.GroupsGetCallbackConfirmationCode(api.Params{"group_id": group}.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("groups.getCallbackConfirmationCode: %w", err)
	}
	if code.Code == "" {
		return "", errors.New("groups.getCallbackConfirmationCode: empty code")
	}
	return code.Code, nil
}

// NewSecret returns a random secret key for a Callback server.
func NewSecret() (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a secret: %w", err)
	}
	return fmt.Sprintf("%x", b), nil
}
