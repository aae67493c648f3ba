package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

func runSetupCmd(vk *vktest.Server, env map[string]string, args ...string) (code int, stdout, stderr string) {
	vars := map[string]string{"VK_API_URL": vk.MethodURL(), "VK_GROUP_ID": strconv.Itoa(servicetest.Group), "VK_TOKEN": "token-1"}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"setup"}, args...), func(k string) string { return vars[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

var printedSecret = regexp.MustCompile(`VK_SECRET=([0-9a-f]{32})\n`)

func TestSetupCreatesThenUpdates(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	other := vk.AddCallbackServer(servicetest.Group, "other bot", "https://other.example/cb", "x")
	const u = "https://bot.example/callback"

	s := setupFirstRun(t, vk, u, other)
	setupRunAgain(t, vk, u, s)
	// A secret given replaces it.
	code, out, _ := runSetupCmd(vk, map[string]string{"VK_SECRET": "given-secret"}, "-url", u)
	if code != 0 || !strings.Contains(out, "The secret given is set at VK: the service must run with it.") || !strings.Contains(out, "VK_SECRET=given-secret\n") {
		t.Fatalf("third run: exit %d, stdout:\n%s", code, out)
	}
	if got := vk.CallbackServers(servicetest.Group)[1].SecretKey; got != "given-secret" || !strings.Contains(out, "updated") {
		t.Errorf("secret = %q, want the one given, and the server told as updated:\n%s", got, out)
	}
	// A new title is an update too; the events, already right, are not set again.
	sets := vk.Calls("groups.setCallbackSettings")
	code, out, _ = runSetupCmd(vk, map[string]string{"VK_SECRET": "given-secret"}, "-url", u, "-title", "counter")
	if code != 0 || !strings.Contains(out, "updated") || vk.CallbackServers(servicetest.Group)[1].Title != "counter" || vk.Calls("groups.setCallbackSettings") != sets {
		t.Errorf("new title: exit %d, title %q, %d settings calls:\n%s", code, vk.CallbackServers(servicetest.Group)[1].Title, vk.Calls("groups.setCallbackSettings")-sets, out)
	}
	if n := vk.Calls("groups.addCallbackServer"); n != 1 {
		t.Errorf("groups.addCallbackServer called %d times, want 1", n)
	}
}

// setupFirstRun runs setup -url u on a community with another bot's
// server (other): it creates a server of its own beside it, with a
// secret it generates and prints, and the message_new event alone. It
// returns the server.
func setupFirstRun(t *testing.T, vk *vktest.Server, u string, other int) vktest.CallbackServer {
	t.Helper()
	code, out, errOut := runSetupCmd(vk, nil, "-url", u)
	if code != 0 {
		t.Fatalf("first run: exit %d, stderr %q", code, errOut)
	}
	m := printedSecret.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "created") || !strings.Contains(out, "VK_CONFIRMATION=vktest-"+strconv.Itoa(servicetest.Group)) {
		t.Fatalf("first run printed:\n%s", out)
	}
	secret := m[1]
	if !strings.Contains(out, "A new secret was generated and set at VK") || strings.Contains(out, "shown only") {
		t.Errorf("first run: the generated secret is not told as set at VK (it is not shown only once):\n%s", out)
	}
	servers := vk.CallbackServers(servicetest.Group)
	if len(servers) != 2 || servers[0].ID != other || servers[0].URL != "https://other.example/cb" {
		t.Fatalf("servers after the first run: %+v", servers)
	}
	s := servers[1]
	if s.URL != u || s.SecretKey != secret || s.Title != vkapi.DefaultTitle || s.APIVersion != vkapi.Version {
		t.Errorf("registered %+v", s)
	}
	for name, on := range s.Events {
		if want := map[bool]int{true: 1, false: 0}[name == "message_new"]; on != want {
			t.Errorf("event %s = %d, want %d", name, on, want)
		}
	}
	return s
}

// setupRunAgain runs setup -url u again with the same settings as the
// run that registered s: nothing to change, and nothing is asked of VK but
// reads; it prints the same secret, read back from VK, and says it is kept.
func setupRunAgain(t *testing.T, vk *vktest.Server, u string, s vktest.CallbackServer) {
	t.Helper()
	edits, sets := vk.Calls("groups.editCallbackServer"), vk.Calls("groups.setCallbackSettings")
	code, out, errOut := runSetupCmd(vk, nil, "-url", u)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("Callback server %d unchanged", s.ID)) || strings.Contains(out, "generated") || strings.Contains(out, "Warning") {
		t.Fatalf("second run: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	if e, st := vk.Calls("groups.editCallbackServer")-edits, vk.Calls("groups.setCallbackSettings")-sets; e != 0 || st != 0 {
		t.Errorf("second run: %d groups.editCallbackServer and %d groups.setCallbackSettings calls, want none", e, st)
	}
	if servers := vk.CallbackServers(servicetest.Group); len(servers) != 2 || servers[1].SecretKey != s.SecretKey {
		t.Fatalf("servers after the second run: %+v", servers)
	}
	if m := printedSecret.FindStringSubmatch(out); m == nil || m[1] != s.SecretKey || !strings.Contains(out, "The server keeps its secret at VK") {
		t.Errorf("second run: want the kept secret %s printed and told as kept:\n%s", s.SecretKey, out)
	}
}

func TestSetupExitCodes(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"help on stdout", nil, []string{"-help"}, 0, "Usage: vkcounter setup", ""},
		{"no url", nil, nil, 2, "", "vkcounter setup: -url is required"},
		{"no community", map[string]string{"VK_GROUP_ID": "", "VK_TOKEN": ""}, []string{"-url", "https://b/cb"}, 2, "", "VK_GROUP_ID and VK_TOKEN are needed for setup"},
		{"neither url nor community", map[string]string{"VK_GROUP_ID": "", "VK_TOKEN": ""}, nil, 2, "", "-url is required: the public URL of the webhook, such as -url https://example.com/callback\nVK_GROUP_ID and VK_TOKEN are needed"},
		{"not a URL", nil, []string{"-url", "bot.example/callback"}, 2, "", "http(s) URL"},
		{"no token", map[string]string{"VK_TOKEN": ""}, []string{"-url", "https://b/cb"}, 2, "", fmt.Sprintf("community %d has no token", servicetest.Group)},
		{"title too long", nil, []string{"-url", "https://b/cb", "-title", "fifteen chars!!"}, 2, "", "at most 14"},
		{"stray argument", nil, []string{"-url", "https://b/cb", "extra"}, 2, "", "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runSetupCmd(vk, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.inStdout) || !strings.Contains(errOut, tt.inStderr) ||
				strings.Contains(errOut, `url ""`) || strings.Contains(errOut, "community 1:") {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q in stdout, %q in stderr", code, out, errOut, tt.code, tt.inStdout, tt.inStderr)
			}
		})
	}
	if n := len(vk.CallbackServers(servicetest.Group)); n != 0 {
		t.Errorf("%d servers registered by bad invocations", n)
	}
	// The help tells what a second run does with the secret.
	if _, out, _ := runSetupCmd(vk, nil, "-h"); strings.Contains(out, "printed once") || !strings.Contains(out, "running setup again\nwith the same -url prints the same one") ||
		!strings.Contains(out, `says "unchanged" and changes nothing at VK`) || !strings.Contains(out, "-disable-others") {
		t.Errorf("setup -h on the secret:\n%s", out)
	}

	vk.FailAlways(15) // access denied: a token without the manage right
	code, _, errOut := runSetupCmd(vk, nil, "-url", "https://b/cb")
	if code != 1 || !strings.Contains(errOut, "groups.getCallbackServers") {
		t.Errorf("VK refusing: exit %d, stderr %q; want 1", code, errOut)
	}
}

// TestConfirmationFollowsVK: with no VK_CONFIRMATION, a confirmation event
// is answered with the code VK gives then: a code changed while the
// service runs (VK changes it from time to time, and when a server's
// settings change) reaches the next confirmation event; while VK hangs,
// the last code it gave (callback's tests hold the wait to ConfirmWait).
func TestConfirmationFollowsVK(t *testing.T) {
	a := startApp(t, nil, map[string]string{"VK_CONFIRMATION": ""})
	confirm := func() (int, string) {
		status, body, _ := a.Post(t, []byte(fmt.Sprintf(`{"type":"confirmation","group_id":%d,"secret":%q}`, servicetest.Group, servicetest.Secret)), nil)
		return status, body
	}
	if status, body := confirm(); status != 200 || body != "vktest-"+strconv.Itoa(servicetest.Group) {
		t.Fatalf("confirmation: %d %q, want the code from groups.getCallbackConfirmationCode", status, body)
	}
	a.VK.SetConfirmation(servicetest.Group, "changed-1")
	if status, body := confirm(); status != 200 || body != "changed-1" {
		t.Fatalf("VK's code changed while running: the next confirmation got %d %q, want %q", status, body, "changed-1")
	}
	if n := a.VK.Calls("groups.getCallbackConfirmationCode"); n != 3 {
		t.Errorf("%d calls of groups.getCallbackConfirmationCode, want 3: one at start, one per event", n)
	}
	a.VK.SetConfirmation(servicetest.Group, "changed-2")
	a.VK.SetOutage(vktest.Hang)
	status, body := confirm()
	a.VK.SetOutage(vktest.Up)
	if status != 200 || body != "changed-1" {
		t.Fatalf("VK hanging: confirmation got %d %q, want the last code VK gave, %q", status, body, "changed-1")
	}
}

// TestSetupOtherServers: setup at a new URL names the community's other
// servers still receiving message_new (each message would reach them
// too), and -disable-others turns it off there, leaving servers that do
// not receive it alone.
func TestSetupOtherServers(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	quiet := vk.AddCallbackServer(servicetest.Group, "other bot", "https://other.example/cb", "x") // message_new off
	if code, _, errOut := runSetupCmd(vk, nil, "-url", "https://old.example/callback"); code != 0 {
		t.Fatalf("first setup: exit %d %s", code, errOut)
	}
	old := vk.CallbackServers(servicetest.Group)[1]
	vk.SetCallbackStatus(servicetest.Group, old.ID, "ok")

	code, out, _ := runSetupCmd(vk, nil, "-url", "https://new.example/callback")
	want := fmt.Sprintf(`Warning: other Callback servers of community %d still receive message_new, so every message reaches them too: server %d "vkcounter" at https://old.example/callback (status ok). Run setup again with -disable-others`, servicetest.Group, old.ID)
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "other.example") {
		t.Fatalf("setup at a new URL: exit %d, want %q, and nothing of server %d, in:\n%s", code, want, quiet, out)
	}
	if vk.CallbackServers(servicetest.Group)[1].Events["message_new"] != 1 {
		t.Fatal("the old server's message_new was turned off without -disable-others")
	}

	code, out, _ = runSetupCmd(vk, nil, "-url", "https://new.example/callback", "-disable-others")
	if code != 0 || !strings.Contains(out, "message_new turned off on the community's other Callback servers: server "+strconv.Itoa(old.ID)) ||
		!strings.Contains(out, "unchanged") {
		t.Fatalf("-disable-others: exit %d:\n%s", code, out)
	}
	for _, s := range vk.CallbackServers(servicetest.Group) {
		want := map[bool]int{true: 1, false: 0}[s.URL == "https://new.example/callback"]
		if s.Events["message_new"] != want {
			t.Errorf("server %d at %s: message_new %d, want %d", s.ID, s.URL, s.Events["message_new"], want)
		}
	}
	if old := vk.CallbackServers(servicetest.Group)[1]; old.Events["wall_post_new"] != 0 || old.URL != "https://old.example/callback" {
		t.Errorf("the old server's other settings changed: %+v", old)
	}
	// Once off, a new run has nothing to say about them.
	if _, out, _ = runSetupCmd(vk, nil, "-url", "https://new.example/callback"); strings.Contains(out, "old.example") {
		t.Errorf("a run after -disable-others still names the old server:\n%s", out)
	}
}
