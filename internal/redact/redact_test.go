package redact_test

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redact"
)

const token = "vk1.a.Zx9_Qw-ErTy12345abcdefghIJKLmnopQRSTuvwxyz0123456789"
const legacy = "5f3c1b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1"

func TestRedacts(t *testing.T) {
	r := redact.New(legacy, "s3cr3t-K3y", "pa\"ss<w>rd", "abc") // "abc" is too short to be taken
	for _, tc := range []struct{ name, in, want string }{
		{"a configured token", "invalid access_token " + legacy + " given", "invalid access_token [secret] given"},
		{"upper-cased", "TOKEN " + strings.ToUpper(legacy), "TOKEN [secret]"},
		{"cut at its end", "access_token=" + legacy[:20] + "...", "access_token=[secret]..."},
		{"cut at its start", "…" + legacy[60:] + ")", "…[secret])"},
		{"a VK-shaped token not configured", "request_params: [{key: access_token, value: " + token + "}]", "request_params: [{key: access_token, value: [secret]}]"},
		{"a VK-shaped token upper-cased and cut", "VK1.A.ZX9_QW-ERTY", "[secret]"},
		{"a secret twice", "s3cr3t-K3y and S3CR3T-K3Y", "[secret] and [secret]"},
		{"in JSON", jsonString("say pa\"ss<w>rd"), `"say [secret]"`},
		{"in HTML", template.HTMLEscapeString("say pa\"ss<w>rd"), "say [secret]"},
		{"too short to be a secret", "abc abcd", "abc abcd"},
		{"nothing", "all is well", "all is well"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestNilRedactsVKTokens: a nil Redactor still removes VK-shaped tokens.
func TestNilRedactsVKTokens(t *testing.T) {
	var r *redact.Redactor
	if got := r.String("t=" + token); got != "t=[secret]" {
		t.Fatalf("got %q", got)
	}
}

// TestWriter: every write through Writer is redacted, and reports the
// length given.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := redact.New(legacy).Writer(&buf)
	line := `{"level":"warn","error":"VK refuses the token ` + legacy + `"}` + "\n"
	n, err := w.Write([]byte(line))
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
	}
	if got := buf.String(); got != `{"level":"warn","error":"VK refuses the token [secret]"}`+"\n" {
		t.Fatalf("wrote %q", got)
	}
}
