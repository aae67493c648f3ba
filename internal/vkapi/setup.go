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
	"github.com/SevereCloud/vksdk/v2/object"
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
	// DisableOthers turns message_new off on the community's other
	// Callback servers, so that no other address gets the messages too.
	DisableOthers bool
}

// An OtherServer is a Callback server of the community at another URL
// that receives message_new.
type OtherServer struct {
	ID     int
	Title  string
	URL    string
	Status string // VK's: "ok" (confirmed: VK posts to it), "unconfigured", "failed", "wait"
}

// SetupResult is what Setup did.
type SetupResult struct {
	// ServerID is the Callback server's id in the community.
	ServerID int
	// Created is true when the server was added.
	Created bool
	// Unchanged is true when the server was already registered exactly
	// so (title, secret, API version and events): no change was asked of
	// VK.
	Unchanged bool
	// Secret is the server's secret key.
	Secret string
	// SecretGenerated is true when Setup generated Secret.
	SecretGenerated bool
	// Confirmation is the string the service must answer the confirmation
	// event with.
	Confirmation string
	// Disabled are the event types Setup turned off.
	Disabled []string
	// Others are the community's other servers that receive message_new
	// (each message would reach them too), or, with
	// SetupOptions.DisableOthers, that did and no longer do.
	Others []OtherServer
	// OthersDisabled tells that message_new was turned off on Others.
	OthersDisabled bool
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
// with the same settings changes nothing (no edit is sent: an edited
// server may need confirming again). It reports the other servers that
// receive message_new, and turns it off there with opts.DisableOthers.
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
	var current *object.GroupsCallbackServer
	var others []object.GroupsCallbackServer
	for i, s := range list.Items {
		if s.URL == opts.URL && current == nil {
			current = &list.Items[i]
			res.ServerID = s.ID
			if opts.Secret == "" {
				opts.Secret = s.SecretKey
			}
			continue
		}
		others = append(others, s)
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
	} else if current.Title != opts.Title || current.SecretKey != opts.Secret {
		server["server_id"] = res.ServerID
		if _, err := vk.GroupsEditCallbackServer(server.WithContext(ctx)); err != nil {
			return res, fmt.Errorf("groups.editCallbackServer: %w", err)
		}
	} else {
		res.Unchanged = true
	}
	var eventsChanged bool
	if eventsChanged, res.Disabled, err = setEvents(ctx, vk, group, res.ServerID); err != nil {
		return res, err
	}
	res.Unchanged = res.Unchanged && !eventsChanged
	for _, o := range others {
		on, err := receivesMessages(ctx, vk, group, o.ID)
		if err != nil {
			return res, err
		}
		if !on {
			continue
		}
		if opts.DisableOthers {
			if _, err := vk.GroupsSetCallbackSettings(api.Params{"group_id": group, "server_id": o.ID, EventMessageNew: 0}.WithContext(ctx)); err != nil {
				return res, fmt.Errorf("groups.setCallbackSettings of server %d: %w", o.ID, err)
			}
			res.OthersDisabled = true
		}
		res.Others = append(res.Others, OtherServer{ID: o.ID, Title: o.Title, URL: o.URL, Status: o.Status})
	}
	if res.Confirmation, err = Confirmation(ctx, vk, group); err != nil {
		return res, err
	}
	return res, nil
}

// callbackSettings are a server's groups.getCallbackSettings, decoded here
// rather than with vksdk's GroupsGetCallbackSettings: its fixed struct of
// event types lags behind the API, and a type VK added since would be
// missed.
type callbackSettings struct {
	APIVersion string                     `json:"api_version"`
	Events     map[string]json.RawMessage `json:"events"`
}

func getSettings(ctx context.Context, vk *api.VK, group, server int) (callbackSettings, error) {
	var cs callbackSettings
	if err := vk.RequestUnmarshal("groups.getCallbackSettings", &cs,
		api.Params{"group_id": group, "server_id": server}.WithContext(ctx)); err != nil {
		return cs, fmt.Errorf("groups.getCallbackSettings of server %d: %w", server, err)
	}
	return cs, nil
}

// on reports whether an event setting is on (VK answers 1 or true).
func on(v json.RawMessage) bool { return string(v) != "0" && string(v) != "false" }

// receivesMessages reports whether a server gets message_new.
func receivesMessages(ctx context.Context, vk *api.VK, group, server int) (bool, error) {
	cs, err := getSettings(ctx, vk, group, server)
	return on(cs.Events[EventMessageNew]), err
}

// setEvents sets the server's API version to Version and turns
// message_new on and every other event type VK lists off, unless they are
// so already. It reports whether it changed anything, and the types it
// turned off.
func setEvents(ctx context.Context, vk *api.VK, group, server int) (changed bool, disabled []string, err error) {
	current, err := getSettings(ctx, vk, group, server)
	if err != nil {
		return false, nil, err
	}
	params := api.Params{"group_id": group, "server_id": server, "api_version": Version, EventMessageNew: 1}
	changed = current.APIVersion != Version || !on(current.Events[EventMessageNew])
	for name, v := range current.Events {
		if name == EventMessageNew {
			continue
		}
		params[name] = 0
		if on(v) {
			disabled = append(disabled, name)
		}
	}
	if !changed && len(disabled) == 0 {
		return false, nil, nil
	}
	if _, err := vk.GroupsSetCallbackSettings(params.WithContext(ctx)); err != nil {
		return false, nil, fmt.Errorf("groups.setCallbackSettings: %w", err)
	}
	sort.Strings(disabled)
	return true, disabled, nil
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
