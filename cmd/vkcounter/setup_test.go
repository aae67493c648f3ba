package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/vkapi"
	"github.com/vkcounter/vkcounter/vktest"
)

func runSetupCmd(vk *vktest.Server, env map[string]string, args ...string) (code int, stdout, stderr string) {
	vars := map[string]string{"VK_API_URL": vk.MethodURL(), "VK_GROUP_ID": strconv.Itoa(testGroup), "VK_TOKEN": "token-1"}
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
	other := vk.AddCallbackServer(testGroup, "other bot", "https://other.example/cb", "x")
	const u = "https://bot.example/callback"

	code, out, errOut := runSetupCmd(vk, nil, "-url", u)
	if code != 0 {
		t.Fatalf("first run: exit %d, stderr %q", code, errOut)
	}
	m := printedSecret.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "created") || !strings.Contains(out, "VK_CONFIRMATION=vktest-"+strconv.Itoa(testGroup)) {
		t.Fatalf("first run printed:\n%s", out)
	}
	secret := m[1]
	if !strings.Contains(out, "A new secret was generated and set at VK") || strings.Contains(out, "shown only") {
		t.Errorf("first run: the generated secret is not told as set at VK (it is not shown only once):\n%s", out)
	}
	servers := vk.CallbackServers(testGroup)
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

	// Again: the same server is updated, its secret kept.
	code, out, errOut = runSetupCmd(vk, nil, "-url", u)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("Callback server %d updated", s.ID)) || strings.Contains(out, "generated") {
		t.Fatalf("second run: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	if servers := vk.CallbackServers(testGroup); len(servers) != 2 || servers[1].SecretKey != secret {
		t.Fatalf("servers after the second run: %+v", servers)
	}
	// It prints the same secret again, read back from VK, and says it is kept.
	if m := printedSecret.FindStringSubmatch(out); m == nil || m[1] != secret || !strings.Contains(out, "The server keeps its secret at VK") {
		t.Errorf("second run: want the kept secret %s printed and told as kept:\n%s", secret, out)
	}
	// A secret given replaces it.
	code, out, _ = runSetupCmd(vk, map[string]string{"VK_SECRET": "given-secret"}, "-url", u)
	if code != 0 || !strings.Contains(out, "The secret given is set at VK: the service must run with it.") || !strings.Contains(out, "VK_SECRET=given-secret\n") {
		t.Fatalf("third run: exit %d, stdout:\n%s", code, out)
	}
	if got := vk.CallbackServers(testGroup)[1].SecretKey; got != "given-secret" {
		t.Errorf("secret = %q, want the one given", got)
	}
	if n := vk.Calls("groups.addCallbackServer"); n != 1 {
		t.Errorf("groups.addCallbackServer called %d times, want 1", n)
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
		{"no token", map[string]string{"VK_TOKEN": ""}, []string{"-url", "https://b/cb"}, 2, "", fmt.Sprintf("community %d has no token", testGroup)},
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
	if n := len(vk.CallbackServers(testGroup)); n != 0 {
		t.Errorf("%d servers registered by bad invocations", n)
	}
	// The help tells what a second run does with the secret.
	if _, out, _ := runSetupCmd(vk, nil, "-h"); strings.Contains(out, "printed once") || !strings.Contains(out, "running setup again\nwith the same -url prints the same one") {
		t.Errorf("setup -h on the secret:\n%s", out)
	}

	vk.FailAlways(15) // access denied: a token without the manage right
	code, _, errOut := runSetupCmd(vk, nil, "-url", "https://b/cb")
	if code != 1 || !strings.Contains(errOut, "groups.getCallbackServers") {
		t.Errorf("VK refusing: exit %d, stderr %q; want 1", code, errOut)
	}
}

func TestConfirmationFetchedAtStart(t *testing.T) {
	a := startApp(t, nil, map[string]string{"VK_CONFIRMATION": ""})
	status, body, _ := a.post(t, []byte(fmt.Sprintf(`{"type":"confirmation","group_id":%d,"secret":%q}`, testGroup, testSecret)), nil)
	if status != 200 || body != "vktest-"+strconv.Itoa(testGroup) {
		t.Fatalf("confirmation: %d %q, want the code from groups.getCallbackConfirmationCode", status, body)
	}
	if n := a.vk.Calls("groups.getCallbackConfirmationCode"); n != 1 {
		t.Errorf("%d calls of groups.getCallbackConfirmationCode, want 1", n)
	}
}
