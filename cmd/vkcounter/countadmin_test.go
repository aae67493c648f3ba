package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/internal/config"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// TestCountAsksTheDemo: beside the README's demo (the embedded Redis),
// `vkcounter count` with no Redis setting asks the service's admin
// address, says so on stderr, and prints the counts on stdout (exit 0); a
// question the service refuses is a usage error (2), no service answering
// a failure (1) naming the address.
func TestCountAsksTheDemo(t *testing.T) {
	a := startApp(t, nil, servicetest.DemoEnv)
	for i, id := range []string{"e1", "e2"} {
		a.MustOK(t, servicetest.DemoEvent(id, 11+i, "hello"))
	}
	env := map[string]string{"ADMIN_ADDR": a.AdminAddr()}
	where := "http://" + a.AdminAddr() + "/texts"

	code, out, errOut := runCountCmd(env, "hello", "never sent")
	if code != exitOK || out != "2\thello\n0\tnever sent\n" || !strings.Contains(errOut, "asked the service at "+where) {
		t.Errorf("count: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCountCmd(env, "-json", "hello")
	var ans admin.Answer
	if err := json.Unmarshal([]byte(out), &ans); code != exitOK || err != nil || len(ans.Texts) != 1 ||
		fmt.Sprint(ans.Texts[0]) != fmt.Sprint(admin.TextCount{GroupID: config.DemoGroupID, Text: "hello", Count: 2}) || ans.WindowSeconds != 86400 {
		t.Errorf("count -json: exit %d, stdout %q (%v)", code, out, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-group", "5", "a"}, "community 5 is not served (served: 1)"},
		{nil, "no text to look up"},
		{[]string{"-attachment", "sticker:x"}, `attachment "sticker:x"`},
	} {
		code, out, errOut := runCountCmd(env, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("count %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}

	closed := tcptest.FreeAddr(t)
	code, out, errOut = runCountCmd(map[string]string{"ADMIN_ADDR": closed}, "hello")
	if want := fmt.Sprintf("no service answers at http://%s/texts (ADMIN_ADDR)", closed); code != exitFailure || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("count with no service: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
}
