// Package admintest reads what the admin surface serves as a test
// compares it: /stats flattened to paths, and the page's tagged figures.
package admintest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Flat is the JSON document doc flattened: {"bot":{"received":5}} gives
// "bot.received" → "5".
func Flat(doc []byte) (map[string]string, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("%w in %s", err, doc)
	}
	flat := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(prefix+k+".", x)
			}
		default:
			flat[strings.TrimSuffix(prefix, ".")] = fmt.Sprint(v)
		}
	}
	walk("", v)
	return flat, nil
}

var tagged = regexp.MustCompile(`data-stat="([^"]+)">([^<]*)<`)

// PageStats are the status page's figures tagged data-stat="path", by
// path: the /stats path each shows (and "ready").
func PageStats(page string) map[string]string {
	out := map[string]string{}
	for _, m := range tagged.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// Disagree returns how the page and /stats (flat, Flat's) disagree: each
// path of want the page does not show, each figure the page shows that
// /stats gives otherwise, and a page that does not say "ready" (its
// "ready" figure). None: they agree.
func Disagree(page string, flat map[string]string, want ...string) []string {
	shown := PageStats(page)
	var out []string
	for _, path := range want {
		if _, ok := shown[path]; !ok {
			out = append(out, "the page does not show "+path)
		}
	}
	for path, v := range shown {
		if path == "ready" {
			if v != "ready" {
				out = append(out, fmt.Sprintf("the page says %q of a ready service", v))
			}
			continue
		}
		if got, ok := flat[path]; !ok || got != v {
			out = append(out, fmt.Sprintf("the page shows %s = %q, /stats %q", path, v, got))
		}
	}
	return out
}
