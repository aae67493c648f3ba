package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// runPrefillCmd runs `vkcounter prefill args` in-process with env as the
// whole environment and stdin as its input.
func runPrefillCmd(env map[string]string, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runPrefill(context.Background(), args, func(k string) string { return env[k] }, stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

// unreadable is a stdin that must not be read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("stdin read, though the command could not run")
	return 0, io.EOF
}

// TestPrefillUsageErrors: without a Redis other processes can reach, or
// without texts, prefill does nothing and exits 2 with the -h pointer.
func TestPrefillUsageErrors(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		stdin io.Reader
		want  string
	}{
		{"embedded Redis", nil, unreadable{t},
			"vkcounter prefill: REDIS_URL or REDIS_CLUSTER is needed: without them the service's Redis is embedded in its process, and nothing else can write into it\n"},
		{"no texts", map[string]string{"REDIS_URL": tg.URL}, strings.NewReader(""),
			"vkcounter prefill: no texts on stdin: prefill reads the texts from stdin, one per line (vkcounter prefill < texts.txt)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runPrefillCmd(tc.env, tc.stdin, "-expired", "2")
			if code != exitUsage || out != "" || errOut != tc.want+"Run \"vkcounter prefill -h\" for usage.\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q with the -h pointer", code, out, errOut, tc.want)
			}
		})
	}
	if keys := redistest.Keys(t, tg.Client, ""); len(keys) != 0 {
		t.Errorf("keys written: %v", keys)
	}
}

// TestPrefillCountsInWords: one occurrence of one text is told in the
// singular.
func TestPrefillCountsInWords(t *testing.T) {
	tg := redistest.Open(t, redistest.Mini)
	prefix := redistest.Prefix(t)
	env := map[string]string{"REDIS_URL": tg.URL, "KEY_PREFIX": prefix, "WINDOW": "1m"}
	code, out, errOut := runPrefillCmd(env, strings.NewReader("hello\n"))
	if code != exitOK || out != "stored 1 expired occurrence of each of 1 text\n" || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if keys := redistest.Keys(t, tg.Client, prefix); len(keys) == 0 {
		t.Error("nothing stored")
	}
}

// TestPrefillRedisUnreachable runs the binary against a Redis that is not
// there: one line on stderr says what failed, in the user's terms; go-redis
// prints nothing of its own.
func TestPrefillRedisUnreachable(t *testing.T) {
	bin := program(t)
	addr := tcptest.FreeAddr(t)
	cmd := exec.Command(bin, "prefill")
	cmd.Env = append(os.Environ(), "REDIS_URL=redis://"+addr+"/0", "REDIS_CLUSTER=", "VK_GROUPS=")
	cmd.Stdin = strings.NewReader("hello\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	want := "vkcounter prefill: cannot reach Redis at " + addr + ": connect: connection refused\n"
	if code := cmd.ProcessState.ExitCode(); code != exitFailure || out.Len() != 0 || errOut.String() != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and only %q", code, out.String(), errOut.String(), want)
	}
}
