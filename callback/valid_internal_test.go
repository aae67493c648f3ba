package callback

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validCorners are texts where a JSON validator may go wrong: numbers in
// every form, escapes, control characters, bytes past ASCII, blanks,
// literals, nesting, and what follows a value.
var validCorners = []string{
	``, ` `, `0`, `-0`, `00`, `01`, `-`, `-01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-3`,
	`+1`, `NaN`, `Inf`, `0x10`, `1_000`, `12345678901234567890123`, `1.0.0`, `1ee5`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\ud800"`, `"\u12"`, `"\u12G4"`,
	`"\x41"`, `"\a"`, `"` + "\x01" + `"`, `"` + "\x1f" + `"`, `"` + "\x7f" + `"`, `"` + "\xff\xfe" + `"`, `"unterminated`, `"\`,
	`true`, `false`, `null`, `tru`, `nul`, `True`, `truex`, `null null`,
	`[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[[[]]]`, `[`, `]`, `[1`, `{}`, `{ }`, `{"a":1}`, `{"a" : 1 , "b":[true]}`,
	`{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a":1}}`, `{"a":1}x`, " \t\r\n{}\n ", "\v{}", "\u00a0{}",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
}

func checkValid(t testing.TB, data []byte) {
	if got, want := valid(data), json.Valid(data); got != want {
		t.Errorf("valid(%.80q) = %v, json.Valid says %v", data, got, want)
	}
}

// TestValidMatchesEncodingJSON: valid agrees with json.Valid on the
// corners, on the fixtures and edge bodies, on generated bodies and on
// each of them cut short or with a byte changed.
func TestValidMatchesEncodingJSON(t *testing.T) {
	var texts []string
	texts = append(texts, validCorners...)
	texts = append(texts, edgeBodies...)
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	rng := rand.New(rand.NewPCG(38, 5))
	for range 3000 {
		texts = append(texts, genBody(rng))
	}
	for _, s := range texts {
		checkValid(t, []byte(s))
		for range 4 {
			b := []byte(s)
			if len(b) == 0 {
				break
			}
			i := rng.IntN(len(b))
			mutated := append([]byte(nil), b...)
			mutated[i] = byte(rng.IntN(256))
			checkValid(t, mutated)
			checkValid(t, b[:i])
		}
	}
}

// FuzzValidMatchesEncodingJSON: valid and json.Valid agree on any text.
func FuzzValidMatchesEncodingJSON(f *testing.F) {
	for _, s := range validCorners {
		if len(s) < 1000 {
			f.Add([]byte(s))
		}
	}
	for _, s := range edgeBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkValid(t, data) })
}
