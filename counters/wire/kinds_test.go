package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// Fixtures of the window and unique opcodes: "api" = 617069, "u" = 75,
// "a" = 61, "bc" = 6263.

func TestKindsEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"whit", wire.AppendWindowHit(nil, 1, 3600, "api"), "90 40 00 00 00000009 00000001 00000e10 0003 617069"},
		{"wcount", wire.AppendWindowCount(nil, 2, 60, "api"), "90 41 00 00 00000009 00000002 0000003c 0003 617069"},
		{"uadd", wire.AppendUniqueAdd(nil, 3, "u", []string{"a", "bc"}), "90 50 00 00 0000000c 00000003 0001 75 0002 0001 61 0002 6263"},
		{"ucount", wire.AppendUniqueCount(nil, 4, []string{"u", "api"}), "90 51 00 00 0000000a 00000004 0002 0001 75 0003 617069"},
		{"whit answer", wire.AppendUint64(nil, wire.OpWindowHit, 1, 41), "91 40 00 00 00000008 00000001 0000000000000029"},
		{"wcount answer", wire.AppendUint64(nil, wire.OpWindowCount, 2, 42), "91 41 00 00 00000008 00000002 000000000000002a"},
		{"uadd changed", wire.AppendFlag(nil, wire.OpUniqueAdd, 3, true), "91 50 00 00 00000001 00000003 01"},
		{"uadd unchanged", wire.AppendFlag(nil, wire.OpUniqueAdd, 3, false), "91 50 00 00 00000001 00000003 00"},
		{"ucount answer", wire.AppendUint64(nil, wire.OpUniqueCount, 4, 1000), "91 51 00 00 00000008 00000004 00000000000003e8"},
		{"list", wire.AppendList(nil, 5, "api", "", 100), "90 28 00 00 00000009 00000005 0064 0003 617069 0000"},
		{"list after", wire.AppendList(nil, 6, "", "u", 2), "90 28 00 00 00000007 00000006 0002 0000 0001 75"},
		{"list entry", wire.AppendListEntry(nil, 5, "api", 7), "91 28 00 00 0000000d 00000005 0000000000000007 0003 617069"},
		{"list end, more", wire.AppendListEnd(nil, 5, true), "91 28 00 00 00000001 00000005 01"},
		{"ucount not found", wire.AppendError(nil, wire.OpUniqueCount, wire.StatusNotFound, 4),
			"91 51 01 00 00000009 00000004 4e6f7420666f756e64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  % x\nwant % x", tc.got, want)
			}
		})
	}
}

func TestParseKinds(t *testing.T) {
	w, err := wire.ParseWindow(unhex(t, "00000e10 0003 617069 ff"))
	if err != nil || w.Window != 3600 || string(w.Name) != "api" {
		t.Fatalf("ParseWindow = %+v, %v", w, err)
	}
	a, err := wire.ParseUniqueAdd(unhex(t, "0001 75 0002 0001 61 0002 6263"))
	if err != nil || string(a.Name) != "u" || len(a.Keys) != 2 || string(a.Keys[0]) != "a" || string(a.Keys[1]) != "bc" {
		t.Fatalf("ParseUniqueAdd = %q, %v", a, err)
	}
	names, err := wire.ParseUniqueCount(unhex(t, "0002 0001 75 0003 617069"))
	if err != nil || len(names) != 2 || string(names[0]) != "u" || string(names[1]) != "api" {
		t.Fatalf("ParseUniqueCount = %q, %v", names, err)
	}
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name  string
		parse func() error
	}{
		{"window short", func() error { _, err := wire.ParseWindow(unhex(t, "000000")); return err }},
		{"window empty name", func() error { _, err := wire.ParseWindow(unhex(t, "0000003c 0000")); return err }},
		{"uadd no keys", func() error { _, err := wire.ParseUniqueAdd(unhex(t, "0001 75 0000")); return err }},
		{"uadd key count over the keys", func() error { _, err := wire.ParseUniqueAdd(unhex(t, "0001 75 0002 0001 61")); return err }},
		{"uadd too many keys", func() error {
			_, err := wire.ParseUniqueAdd(wire.AppendUniqueAdd(nil, 0, "u", make([]string, 1001))[wire.HeaderSize:])
			return err
		}},
		{"uadd empty key", func() error { _, err := wire.ParseUniqueAdd(unhex(t, "0001 75 0001 0000")); return err }},
		{"uadd long key", func() error {
			_, err := wire.ParseUniqueAdd(wire.AppendUniqueAdd(nil, 0, "u", []string{long})[wire.HeaderSize:])
			return err
		}},
		{"uadd long name", func() error {
			_, err := wire.ParseUniqueAdd(wire.AppendUniqueAdd(nil, 0, long, []string{"a"})[wire.HeaderSize:])
			return err
		}},
		{"uadd no count", func() error { _, err := wire.ParseUniqueAdd(unhex(t, "0001 75")); return err }},
		{"ucount no names", func() error { _, err := wire.ParseUniqueCount(unhex(t, "0000")); return err }},
		{"ucount too many names", func() error {
			_, err := wire.ParseUniqueCount(wire.AppendUniqueCount(nil, 0, make([]string, 101))[wire.HeaderSize:])
			return err
		}},
		{"ucount short", func() error { _, err := wire.ParseUniqueCount(unhex(t, "00")); return err }},
		{"ucount name beyond", func() error { _, err := wire.ParseUniqueCount(unhex(t, "0001 0005 61")); return err }},
		{"ucount long name", func() error {
			_, err := wire.ParseUniqueCount(wire.AppendUniqueCount(nil, 0, []string{long})[wire.HeaderSize:])
			return err
		}},
	} {
		if err := tc.parse(); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	l, err := wire.ParseList(unhex(t, "0064 0003 617069 0001 75"))
	if err != nil || l.Limit != 100 || string(l.Prefix) != "api" || string(l.After) != "u" {
		t.Fatalf("ParseList = %+v, %v", l, err)
	}
	if l, err := wire.ParseList(unhex(t, "0001 0000 0000")); err != nil || len(l.Prefix) != 0 || len(l.After) != 0 {
		t.Fatalf("ParseList of an empty prefix = %+v, %v", l, err)
	}
	for _, b := range []string{"00", "0001", "0001 0005 61", "0001 0000", "0001 0000 0003 6161"} {
		if _, err := wire.ParseList(unhex(t, b)); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("ParseList(%s) = %v, want ErrInvalid", b, err)
		}
	}
	if _, err := wire.ParseList(wire.AppendList(nil, 0, long, "", 1)[wire.HeaderSize:]); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("ParseList with a 256-byte prefix = %v, want ErrInvalid", err)
	}
	if name, total, err := wire.ParseListEntry(unhex(t, "0000000000000007 0003 617069")); name != "api" || total != 7 || err != nil {
		t.Fatalf("ParseListEntry = %q, %d, %v", name, total, err)
	}
	if _, _, err := wire.ParseListEntry(unhex(t, "0000000000000007 0004 617069")); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("ParseListEntry with a bad length = %v", err)
	}
	if f, err := wire.ParseFlag([]byte{1}); err != nil || !f {
		t.Fatalf("ParseFlag(1) = %v, %v", f, err)
	}
	for _, b := range [][]byte{nil, {2}, {0, 0}} {
		if _, err := wire.ParseFlag(b); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("ParseFlag(% x) = %v, want ErrMalformed", b, err)
		}
	}
}
