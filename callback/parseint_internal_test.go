package callback

import (
	"strconv"
	"testing"
)

// FuzzParseInt checks parseInt against strconv.ParseInt, which it stands
// in for, on every input, for int and int64 (and int32, the bound check).
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "+7", "007", "-", "+", "", "1.0", "1e3", " 1", "1_0",
		"999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "2000000001", "x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, bits := range []int{32, strconv.IntSize, 64} {
			want, err := strconv.ParseInt(s, 10, bits)
			got, ok := parseInt([]byte(s), bits)
			if ok != (err == nil) || ok && got != want {
				t.Fatalf("parseInt(%q, %d) = %d, %v; strconv: %d, %v", s, bits, got, ok, want, err)
			}
		}
	})
}
