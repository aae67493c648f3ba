package wire_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// The names and keys of the extension fixtures, in hex:
// "vk.messages" = 766b2e6d65737361676573 (11 bytes), "vk.users" =
// 766b2e7573657273 (8), "42" = 3432 (2).

func TestExtensionRequestEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"hit", wire.AppendHit(nil, 5, "vk.messages"), "90 20 00 00 0000000d 00000005 000b 766b2e6d65737361676573"},
		{"total", wire.AppendTotal(nil, 6, "vk.messages"), "90 21 00 00 0000000d 00000006 000b 766b2e6d65737361676573"},
		{"add", wire.AppendAdd(nil, 10, "vk.messages", 5), "90 22 00 00 00000015 0000000a 0000000000000005 000b 766b2e6d65737361676573"},
		{"visit", wire.AppendVisit(nil, 7, 300, "vk.users", "42"),
			"90 30 00 00 00000012 00000007 0000012c 0008 766b2e7573657273 0002 3432"},
		{"leave", wire.AppendLeave(nil, 8, "vk.users", "42"), "90 31 00 00 0000000e 00000008 0008 766b2e7573657273 0002 3432"},
		{"active default timeout", wire.AppendActive(nil, 9, 0, "vk.users"),
			"90 32 00 00 0000000e 00000009 00000000 0008 766b2e7573657273"},
		{"visit empty key is encoded as asked", wire.AppendVisit(nil, 1, 0, "n", ""), "90 30 00 00 00000009 00000001 00000000 0001 6e 0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  % x\nwant % x", tc.got, want)
			}
		})
	}
}

func TestExtensionResponseEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"hit", wire.AppendUint64(nil, wire.OpHit, 5, 926), "91 20 00 00 00000008 00000005 000000000000039e"},
		{"total", wire.AppendUint64(nil, wire.OpTotal, 6, 1<<63-1), "91 21 00 00 00000008 00000006 7fffffffffffffff"},
		{"add", wire.AppendUint64(nil, wire.OpAdd, 10, 7), "91 22 00 00 00000008 0000000a 0000000000000007"},
		{"visit new", wire.AppendUint32Flag(nil, wire.OpVisit, 7, 3, true), "91 30 00 00 00000005 00000007 00000003 01"},
		{"leave not removed", wire.AppendUint32Flag(nil, wire.OpLeave, 8, 2, false), "91 31 00 00 00000005 00000008 00000002 00"},
		{"active", wire.AppendUint32(nil, wire.OpActive, 9, 2), "91 32 00 00 00000004 00000009 00000002"},
		{"total not found", wire.AppendError(nil, wire.OpTotal, wire.StatusNotFound, 6),
			"91 21 01 00 00000009 00000006 4e6f7420666f756e64"},
		{"store failure", wire.AppendError(nil, wire.OpHit, wire.StatusStoreFailure, 1),
			"91 20 86 00 00000011 00000001 53746f726520756e617661696c61626c65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  % x\nwant % x", tc.got, want)
			}
		})
	}
}

func TestParseAdd(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		delta      uint64
		want       string
		wantErr    string
	}{
		{name: "add", body: "0000000000000005 0002 6162", delta: 5, want: "ab"},
		{name: "add the largest delta", body: "7fffffffffffffff 0001 61 ffff", delta: 1<<63 - 1, want: "a"},
		{name: "add 0", body: "0000000000000000 0001 61", wantErr: "delta 0"},
		{name: "add beyond int64", body: "8000000000000000 0001 61", wantErr: "delta 9223372036854775808"},
		{name: "add empty name", body: "0000000000000001 0000", wantErr: "name length is 0"},
		{name: "add no name", body: "0000000000000001", wantErr: "shorter"},
		{name: "add short", body: "00000001", wantErr: "shorter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := wire.ParseAdd(unhex(t, tc.body))
			if tc.wantErr != "" {
				if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrInvalid with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || r.Delta != tc.delta || string(r.Name) != tc.want {
				t.Fatalf("got %d %q, %v; want %d %q", r.Delta, r.Name, err, tc.delta, tc.want)
			}
		})
	}
}

func TestParseExtensionRequests(t *testing.T) {
	// want is "timeout name key" as parsed, or "" for invalid.
	parse := func(op wire.Opcode, body []byte) (timeout uint32, name, key []byte, err error) {
		switch op {
		case wire.OpHit:
			name, err = wire.ParseHit(body)
		case wire.OpTotal:
			name, err = wire.ParseTotal(body)
		case wire.OpVisit:
			var r wire.VisitRequest
			r, err = wire.ParseVisit(body)
			timeout, name, key = r.Timeout, r.Name, r.Key
		case wire.OpLeave:
			var r wire.LeaveRequest
			r, err = wire.ParseLeave(body)
			name, key = r.Name, r.Key
		case wire.OpActive:
			var r wire.ActiveRequest
			r, err = wire.ParseActive(body)
			timeout, name = r.Timeout, r.Name
		}
		return timeout, name, key, err
	}
	for _, tc := range []struct {
		name    string
		op      wire.Opcode
		body    string
		want    string
		wantErr string
	}{
		{name: "hit", op: wire.OpHit, body: "0002 6162", want: "0 ab "},
		{name: "hit trailing bytes", op: wire.OpHit, body: "0001 61 ffff", want: "0 a "},
		{name: "hit empty name", op: wire.OpHit, body: "0000", wantErr: "name length is 0"},
		{name: "hit empty body", op: wire.OpHit, body: "", wantErr: "shorter"},
		{name: "hit name beyond body", op: wire.OpHit, body: "0003 6162", wantErr: "name length exceeds"},
		{name: "total", op: wire.OpTotal, body: "0001 78", want: "0 x "},
		{name: "total empty name", op: wire.OpTotal, body: "0000 ffff", wantErr: "name length is 0"},
		{name: "visit", op: wire.OpVisit, body: "0000012c 0001 6e 0002 3432", want: "300 n 42"},
		{name: "visit max timeout", op: wire.OpVisit, body: "ffffffff 0001 6e 0001 6b ee", want: "4294967295 n k"},
		{name: "visit empty name", op: wire.OpVisit, body: "00000000 0000 0001 6b", wantErr: "name length is 0"},
		{name: "visit empty key", op: wire.OpVisit, body: "00000000 0001 6e 0000", wantErr: "key length is 0"},
		{name: "visit no key", op: wire.OpVisit, body: "00000000 0001 6e", wantErr: "shorter"},
		{name: "visit key beyond body", op: wire.OpVisit, body: "00000000 0001 6e 0003 6b6b", wantErr: "key length exceeds"},
		{name: "visit short", op: wire.OpVisit, body: "000000", wantErr: "shorter"},
		{name: "leave", op: wire.OpLeave, body: "0001 6e 0001 6b", want: "0 n k"},
		{name: "leave empty key", op: wire.OpLeave, body: "0001 6e 0000", wantErr: "key length is 0"},
		{name: "leave empty name", op: wire.OpLeave, body: "0000 0001 6b", wantErr: "name length is 0"},
		{name: "active", op: wire.OpActive, body: "0000003c 0001 6e", want: "60 n "},
		{name: "active empty name", op: wire.OpActive, body: "0000003c 0000", wantErr: "name length is 0"},
		{name: "active short", op: wire.OpActive, body: "0000003c", wantErr: "shorter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout, name, key, err := parse(tc.op, unhex(t, tc.body))
			if tc.wantErr != "" {
				if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrInvalid with %q", err, tc.wantErr)
				}
				return
			}
			got := strings.Join([]string{strconv.FormatUint(uint64(timeout), 10), string(name), string(key)}, " ")
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseExtensionResponses(t *testing.T) {
	if v, err := wire.ParseUint64(unhex(t, "000000000000039e")); v != 926 || err != nil {
		t.Fatalf("ParseUint64 = %d, %v", v, err)
	}
	if v, flag, err := wire.ParseUint32Flag(unhex(t, "00000003 01")); v != 3 || !flag || err != nil {
		t.Fatalf("ParseUint32Flag = %d %v, %v", v, flag, err)
	}
	if v, flag, err := wire.ParseUint32Flag(unhex(t, "00000002 00")); v != 2 || flag || err != nil {
		t.Fatalf("ParseUint32Flag = %d %v, %v", v, flag, err)
	}
	for name, body := range map[string]string{
		"uint64 short": "00000000000003", "uint64 long": "000000000000039e00",
	} {
		if _, err := wire.ParseUint64(unhex(t, body)); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	for name, body := range map[string]string{
		"flag short": "00000003", "flag long": "00000003 0100", "flag 2": "00000003 02",
	} {
		if _, _, err := wire.ParseUint32Flag(unhex(t, body)); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestCheckKey(t *testing.T) {
	if wire.CheckKey("") == nil || wire.CheckKey(strings.Repeat("k", wire.MaxFieldLen+1)) == nil {
		t.Fatal("CheckKey accepted a bad key")
	}
	if err := wire.CheckKey(strings.Repeat("k", wire.MaxFieldLen)); err != nil {
		t.Fatal(err)
	}
}

func TestExtensionBodyLimits(t *testing.T) {
	// The largest Visit the stores accept (longest name and key) is read,
	// not refused, and so is one with fields a little too long for the
	// stores (within the allowance), which the server answers Invalid
	// arguments.
	long := strings.Repeat("x", wire.MaxFieldLen)
	stream := wire.AppendVisit(nil, 1, 0, long, long)
	stream = wire.AppendHit(stream, 2, long+strings.Repeat("y", wire.BodyAllowance))
	fs, err := readAll(wire.NewRequestReader(bytes.NewReader(stream)))
	if len(fs) != 2 {
		t.Fatalf("%d frames, %v", len(fs), err)
	}
	req, err := wire.ParseVisit(fs[0].Body)
	if err != nil || len(req.Name) != wire.MaxFieldLen || len(req.Key) != wire.MaxFieldLen {
		t.Fatalf("largest visit: %v", err)
	}
	// One byte over the allowance is a protocol error, for every opcode
	// whose fields the stores bound.
	for op, fixed := range map[wire.Opcode]uint32{
		wire.OpHit: 2 + wire.MaxFieldLen, wire.OpTotal: 2 + wire.MaxFieldLen, wire.OpAdd: 8 + 2 + wire.MaxFieldLen,
		wire.OpVisit: 4 + 2*(2+wire.MaxFieldLen), wire.OpLeave: 2 * (2 + wire.MaxFieldLen), wire.OpActive: 4 + 2 + wire.MaxFieldLen,
		wire.OpWindowHit: 4 + 2 + wire.MaxFieldLen, wire.OpWindowCount: 4 + 2 + wire.MaxFieldLen,
	} {
		hdr := wire.AppendHeader(nil, wire.Header{Magic: wire.MagicRequest, Opcode: op, BodyLen: fixed + wire.BodyAllowance + 1, Opaque: 1})
		if _, err := wire.NewRequestReader(bytes.NewReader(hdr)).Read(); !errors.Is(err, wire.ErrBodyTooLong) {
			t.Errorf("over-long %s: %v", op, err)
		}
	}
}
