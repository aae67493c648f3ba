package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/vkapi"
)

const setupUsage = `Usage: vkcounter setup -url https://<host>/callback [flags]

Registers the Callback API server of each community (or updates the one
with the same URL), sets API version %s and the event types to
message_new only, then prints the settings for vkcounter serve. Run again
with the same settings, it says "unchanged" and changes nothing at VK.
The community's other Callback servers that still receive message_new
(an old address, another bot) are named: each message would reach them
too; -disable-others turns message_new off on them. The communities and tokens come from VK_GROUP_ID and
VK_TOKEN, or VK_GROUPS; the token needs the "manage" right.

The secret key: one given (-secret, VK_SECRET, or the secret of VK_GROUPS)
is set at VK; without one, the server being updated keeps its secret, and a
new server gets a generated one. VK keeps the secret and shows it to the
manage token, so every run prints the secret in use: running setup again
with the same -url prints the same one. When the secret set at VK changes,
restart the service with the new VK_SECRET.

Flags:
`

// runSetup is `vkcounter setup`.
func runSetup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	cbURL := fs.String("url", "", "public URL of the webhook, such as https://example.com/callback (required)")
	title := fs.String("title", vkapi.DefaultTitle, fmt.Sprintf("title of the server in VK's settings (at most %d characters)", vkapi.MaxTitle))
	settings := config.Bind(fs,
		config.Use{Env: "VK_GROUP_ID", Flag: "group-id", Help: "community id (default VK_GROUP_ID)"},
		config.Use{Env: "VK_TOKEN", Flag: "token", Help: "community token with the manage right (default VK_TOKEN)"},
		config.Use{Env: "VK_SECRET", Flag: "secret", Help: "secret key (default VK_SECRET; empty keeps the server's or generates one)"},
		config.Use{Env: "VK_API_URL", Flag: "api-url", Help: "VK API base URL (default VK_API_URL, else " + vkapi.DefaultMethodURL + ")"},
		config.Use{Env: "VK_GROUPS"})
	disableOthers := fs.Bool("disable-others", false, "turn message_new off on the community's Callback servers at other URLs")
	usage := func(err error) int { return usageError(stderr, "setup", err) }
	if code, ok := parseFlags(fs, args, fmt.Sprintf(setupUsage, vkapi.Version), stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	given := givenFlags(fs)
	cfg, err := settings.Read(getenv)
	switch {
	case err != nil:
		return usage(err)
	case cfg.VKGroups != "" && (given["group-id"] || given["token"] || given["secret"]):
		return usage(errors.New("-group-id, -token and -secret replace VK_GROUPS; unset VK_GROUPS to use them"))
	}
	var errs []error
	if *cbURL == "" {
		errs = append(errs, errors.New("-url is required: the public URL of the webhook, such as -url https://example.com/callback"))
	}
	communities, err := cfg.Communities()
	switch {
	case err != nil:
		errs = append(errs, err)
	case cfg.Demo():
		errs = append(errs, errors.New("VK_GROUP_ID and VK_TOKEN are needed for setup (or -group-id and -token, or VK_GROUPS)"))
	}
	if len(errs) > 0 {
		return usage(errors.Join(errs...))
	}
	var jobs []vkapi.SetupOptions
	for _, c := range communities {
		if len(c.Tokens()) == 0 {
			return usage(fmt.Errorf("community %d has no token: setup needs one with the manage right (VK_TOKEN, -token, or the token of VK_GROUPS)", c.GroupID))
		}
		o := vkapi.SetupOptions{GroupID: c.GroupID, URL: *cbURL, Title: *title, Secret: c.Secret, DisableOthers: *disableOthers}
		if err := o.Validate(); err != nil {
			return usage(err)
		}
		jobs = append(jobs, o)
	}

	failed := false
	for i, o := range jobs {
		vk := vkapi.New(communities[i].Tokens()[0], vkapi.Options{MethodURL: cfg.VKAPIURL})
		res, err := vkapi.Setup(ctx, vk, o)
		if err != nil {
			fmt.Fprintf(stderr, "vkcounter setup: community %d: %v\n", o.GroupID, err)
			failed = true
			continue
		}
		printSetup(stdout, o, res, o.Secret != "", len(jobs) > 1)
	}
	if failed {
		return exitFailure
	}
	return exitOK
}

// printSetup tells what Setup did and the settings to serve with.
// given is true when the secret came from -secret, VK_SECRET or VK_GROUPS.
func printSetup(w io.Writer, o vkapi.SetupOptions, res vkapi.SetupResult, given, several bool) {
	verb := "updated"
	switch {
	case res.Created:
		verb = "created"
	case res.Unchanged:
		verb = "unchanged"
	}
	fmt.Fprintf(w, "Community %d: Callback server %d %s for %s (API %s, events: %s only).\n",
		o.GroupID, res.ServerID, verb, o.URL, vkapi.Version, vkapi.EventMessageNew)
	if len(res.Disabled) > 0 {
		fmt.Fprintf(w, "Turned off: %s.\n", strings.Join(res.Disabled, ", "))
	}
	if len(res.Others) > 0 {
		list := make([]string, len(res.Others))
		for i, s := range res.Others {
			list[i] = fmt.Sprintf("server %d %q at %s (status %s)", s.ID, s.Title, s.URL, s.Status)
		}
		if res.OthersDisabled {
			fmt.Fprintf(w, "message_new turned off on the community's other Callback servers: %s.\n", strings.Join(list, "; "))
		} else {
			fmt.Fprintf(w, "Warning: other Callback servers of community %d still receive message_new, so every message reaches them too: %s. Run setup again with -disable-others to turn it off there (or remove them in the community's Callback API settings).\n",
				o.GroupID, strings.Join(list, "; "))
		}
	}
	switch {
	case res.SecretGenerated:
		fmt.Fprintln(w, "A new secret was generated and set at VK: the service must run with it (below). Keep it in your deployment's secrets; running setup again with this URL keeps it.")
	case given:
		fmt.Fprintln(w, "The secret given is set at VK: the service must run with it.")
	default:
		fmt.Fprintln(w, "The server keeps its secret at VK (below); running setup again with this URL keeps it too.")
	}
	fmt.Fprintln(w, "Serve with:")
	if several {
		fmt.Fprintf(w, "  in VK_GROUPS: {\"group_id\":%d,\"secret\":%q,\"confirmation\":%q,\"token\":\"…\"}\n",
			o.GroupID, res.Secret, res.Confirmation)
	} else {
		fmt.Fprintf(w, "  VK_GROUP_ID=%d\n  VK_SECRET=%s\n  VK_CONFIRMATION=%s\n", o.GroupID, res.Secret, res.Confirmation)
	}
	fmt.Fprintln(w, "(VK_CONFIRMATION may be left empty: the service fetches it at start.) VK confirms the server by calling the URL: start the service, then press \"Confirm\" in the community's Callback API settings if it is not confirmed yet.")
}
