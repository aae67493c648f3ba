// Package redact removes secrets from text before it is printed or served:
// every secret it was given, in any letter case, whole or cut at either
// end (a run of CutLen of its first or last bytes), in the forms JSON and
// HTML escaping give it, and any token shaped like a VK access token
// (vk1.a.…), configured or not. Each removal leaves Mark in its place, so
// a reader sees where something was removed.
//
// A Redactor is immutable and safe for concurrent use; Writer wraps an
// io.Writer (a logger's) so that no line written through it can forget.
package redact

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Mark replaces each secret removed.
const Mark = "[secret]"

// MinLen is the shortest value taken as a secret: shorter ones would match
// ordinary words and numbers everywhere.
const MinLen = 4

// CutLen is how many of a secret's first (or last) bytes, found together,
// are taken as the secret cut short (a quoted token truncated, or
// masked but for its end); the match extends as far as the secret goes on.
const CutLen = 8

// vkToken matches a VK access token of the current shape
// ("vk1.a." and base64url characters), configured or not.
var vkToken = regexp.MustCompile(`(?i)vk1\.a\.[a-z0-9_\-]+`)

// A Redactor removes a fixed set of secrets. The zero value and nil remove
// only VK-shaped tokens.
type Redactor struct {
	secrets [][]byte // lower-cased (ASCII), each at least MinLen bytes, escaped forms included
}

// New returns a Redactor of secrets; values shorter than MinLen are
// ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) < MinLen {
			continue
		}
		js, _ := json.Marshal(s)
		for _, form := range []string{s, string(js[1 : len(js)-1]), html.EscapeString(s), jsonQuoteOnly(s)} {
			f := string(lower([]byte(form)))
			if !seen[f] {
				seen[f] = true
				r.secrets = append(r.secrets, []byte(f))
			}
		}
	}
	return r
}

// jsonQuoteOnly escapes s as zerolog does: quotes and backslashes, not
// HTML's characters.
func jsonQuoteOnly(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// String is s without its secrets.
func (r *Redactor) String(s string) string {
	out := r.Bytes([]byte(s))
	return string(out)
}

// Bytes is b without its secrets; b itself is returned when there is
// nothing to remove.
func (r *Redactor) Bytes(b []byte) []byte {
	var spans [][2]int
	for _, m := range vkToken.FindAllIndex(b, -1) {
		spans = append(spans, [2]int{m[0], m[1]})
	}
	if r != nil && len(r.secrets) > 0 {
		low := lower(b)
		for _, s := range r.secrets {
			spans = append(spans, find(low, s)...)
		}
	}
	if len(spans) == 0 {
		return b
	}
	slices.SortFunc(spans, func(x, y [2]int) int { return x[0] - y[0] })
	var out bytes.Buffer
	at := 0
	for _, sp := range spans {
		if sp[1] <= at {
			continue
		}
		if sp[0] >= at {
			out.Write(b[at:sp[0]])
			out.WriteString(Mark)
		}
		at = sp[1]
	}
	out.Write(b[at:])
	return out.Bytes()
}

// find returns the spans of low that are s, or a run of s's first or last
// CutLen bytes extended as far as it matches s.
func find(low, s []byte) [][2]int {
	var spans [][2]int
	head := s[:min(len(s), CutLen)]
	for i := 0; ; {
		k := bytes.Index(low[i:], head)
		if k < 0 {
			break
		}
		start := i + k
		n := len(head)
		for n < len(s) && start+n < len(low) && low[start+n] == s[n] {
			n++
		}
		spans = append(spans, [2]int{start, start + n})
		i = start + n
	}
	if len(s) <= CutLen {
		return spans
	}
	tail := s[len(s)-CutLen:]
	for i := 0; ; {
		k := bytes.Index(low[i:], tail)
		if k < 0 {
			break
		}
		end := i + k + CutLen
		n := CutLen
		for n < len(s) && end-n-1 >= 0 && low[end-n-1] == s[len(s)-n-1] {
			n++
		}
		spans = append(spans, [2]int{end - n, end})
		i = end
	}
	return spans
}

// lower is b with ASCII letters lower-cased, byte for byte (offsets into
// it are offsets into b).
func lower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// Writer returns w redacting every write: each write is redacted on its
// own, so a secret split across two writes passes. A logger writes each
// line in one write.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{r: r, w: w} }

type writer struct {
	r *Redactor
	w io.Writer
}

// Write writes p without its secrets and reports len(p) on success.
func (w *writer) Write(p []byte) (int, error) {
	if _, err := w.w.Write(w.r.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
