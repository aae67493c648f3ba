package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// unhex decodes a fixture written as hex with spaces for readability.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad fixture %q: %v", s, err)
	}
	return b
}

func TestRequestEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"noop", wire.AppendNoop(nil, 0x01020304), "90 00 00 00 00000000 01020304"},
		{"get", wire.AppendGet(nil, 1, "ab"), "90 01 00 00 00000004 00000001 0002 6162"},
		{"acquire", wire.AppendAcquire(nil, 7, "jobs", 1, 10),
			"90 02 00 00 0000000e 00000007 00000001 0000000a 0004 6a6f6273"},
		{"release", wire.AppendRelease(nil, 7, "jobs", 1), "90 03 00 00 0000000a 00000007 00000001 0004 6a6f6273"},
		{"stats", wire.AppendStats(nil, 9), "90 10 00 00 00000000 00000009"},
		{"dump", wire.AppendDump(nil, 9), "90 11 00 00 00000000 00000009"},
		{"appends", wire.AppendNoop([]byte{0xee}, 2), "ee 90 00 00 00 00000000 00000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  % x\nwant % x", tc.got, want)
			}
		})
	}
}

func TestResponseEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"noop", wire.AppendResponse(nil, wire.OpNoop, wire.StatusOK, 0x01020304, nil), "91 00 00 00 00000000 01020304"},
		{"get", wire.AppendUint32(nil, wire.OpGet, 1, 3), "91 01 00 00 00000004 00000001 00000003"},
		{"acquire", wire.AppendUint32(nil, wire.OpAcquire, 7, 1), "91 02 00 00 00000004 00000007 00000001"},
		{"release", wire.AppendResponse(nil, wire.OpRelease, wire.StatusOK, 7, nil), "91 03 00 00 00000000 00000007"},
		{"stats", wire.AppendStatsResponse(nil, 5, []wire.Stat{{Name: "objects", Value: "1"}, {Name: "gc_count", Value: "12"}}),
			"91 10 00 00 0000001a 00000005 0007 0001 6f626a65637473 31 0008 0002 67635f636f756e74 3132"},
		{"dump entry", wire.AppendDumpEntry(nil, 6, wire.DumpEntry{Name: "ab", Consumption: 2, MaxConsumption: 5}),
			"91 11 00 00 0000000c 00000006 00000002 00000005 0002 6162"},
		{"dump end", wire.AppendDumpEnd(nil, 6), "91 11 00 00 00000000 00000006"},
		{"not found", wire.AppendError(nil, wire.OpGet, wire.StatusNotFound, 1),
			"91 01 01 00 00000009 00000001 4e6f7420666f756e64"},
		{"invalid", wire.AppendError(nil, wire.OpAcquire, wire.StatusInvalid, 1),
			"91 02 04 00 00000011 00000001 496e76616c696420617267756d656e7473"},
		{"not available", wire.AppendError(nil, wire.OpAcquire, wire.StatusNotAvailable, 1),
			"91 02 21 00 00000016 00000001 5265736f75726365206e6f7420617661696c61626c65"},
		{"not acquired", wire.AppendError(nil, wire.OpRelease, wire.StatusNotAcquired, 1),
			"91 03 22 00 0000000c 00000001 4e6f74206163717569726564"},
		{"unknown command", wire.AppendError(nil, 0x7f, wire.StatusUnknownCommand, 1),
			"91 7f 81 00 0000000f 00000001 556e6b6e6f776e20636f6d6d616e64"},
		{"out of memory", wire.AppendError(nil, wire.OpAcquire, wire.StatusOutOfMemory, 1),
			"91 02 82 00 0000000b 00000001 4f75744f664d656d6f7279"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  % x\nwant % x", tc.got, want)
			}
		})
	}
}

func TestParseRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   wire.Opcode
		body string
		// want is "resources maximum name" as parsed, or "" for invalid.
		res, max uint32
		want     string
	}{
		{name: "get", op: wire.OpGet, body: "0002 6162", want: "ab"},
		{name: "get with trailing bytes", op: wire.OpGet, body: "0001 61 ffff", want: "a"},
		{name: "get NUL in name", op: wire.OpGet, body: "0002 0000", want: "\x00\x00"},
		{name: "get empty body", op: wire.OpGet, body: ""},
		{name: "get 1 byte", op: wire.OpGet, body: "00"},
		{name: "get empty name", op: wire.OpGet, body: "0000"},
		{name: "get name beyond body", op: wire.OpGet, body: "0003 6162"},
		{name: "acquire", op: wire.OpAcquire, body: "00000001 0000000a 0004 6a6f6273", res: 1, max: 10, want: "jobs"},
		{name: "acquire maximum equal", op: wire.OpAcquire, body: "00000005 00000005 0001 61", res: 5, max: 5, want: "a"},
		{name: "acquire short", op: wire.OpAcquire, body: "00000001 0000000a 00"},
		{name: "acquire zero resources", op: wire.OpAcquire, body: "00000000 0000000a 0001 61"},
		{name: "acquire maximum below", op: wire.OpAcquire, body: "00000002 00000001 0001 61"},
		{name: "acquire empty name", op: wire.OpAcquire, body: "00000001 00000001 0000"},
		{name: "acquire name beyond body", op: wire.OpAcquire, body: "00000001 00000001 0002 61"},
		{name: "release", op: wire.OpRelease, body: "00000002 0001 61", res: 2, want: "a"},
		{name: "release zero", op: wire.OpRelease, body: "00000000 0001 61", want: "a"},
		{name: "release short", op: wire.OpRelease, body: "00000000 00"},
		{name: "release empty name", op: wire.OpRelease, body: "00000001 0000"},
		{name: "release name beyond body", op: wire.OpRelease, body: "00000001 0009 61"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := unhex(t, tc.body)
			var (
				name     []byte
				res, max uint32
				err      error
			)
			switch tc.op {
			case wire.OpGet:
				name, err = wire.ParseGet(body)
			case wire.OpAcquire:
				var r wire.AcquireRequest
				r, err = wire.ParseAcquire(body)
				name, res, max = r.Name, r.Resources, r.Maximum
			case wire.OpRelease:
				var r wire.ReleaseRequest
				r, err = wire.ParseRelease(body)
				name, res = r.Name, r.Resources
			}
			if tc.want == "" {
				if !errors.Is(err, wire.ErrInvalid) {
					t.Fatalf("error %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || string(name) != tc.want || res != tc.res || max != tc.max {
				t.Fatalf("got %q %d %d %v, want %q %d %d", name, res, max, err, tc.want, tc.res, tc.max)
			}
		})
	}
}

func TestParseResponses(t *testing.T) {
	stats, err := wire.ParseStats(unhex(t, "0007 0001 6f626a65637473 31 0001 0000 78"))
	if err != nil || len(stats) != 2 || stats[0] != (wire.Stat{Name: "objects", Value: "1"}) || stats[1] != (wire.Stat{Name: "x"}) {
		t.Fatalf("ParseStats = %+v, %v", stats, err)
	}
	if n, err := stats[0].Uint(); n != 1 || err != nil {
		t.Fatalf("Uint = %d, %v", n, err)
	}
	e, err := wire.ParseDumpEntry(unhex(t, "00000002 00000005 0002 6162"))
	if err != nil || e != (wire.DumpEntry{Name: "ab", Consumption: 2, MaxConsumption: 5}) {
		t.Fatalf("ParseDumpEntry = %+v, %v", e, err)
	}
	if v, err := wire.ParseUint32(unhex(t, "fffffffe")); v != 0xfffffffe || err != nil {
		t.Fatalf("ParseUint32 = %d, %v", v, err)
	}
	for name, bad := range map[string]func() error{
		"stats trailing bytes": func() error { _, err := wire.ParseStats(unhex(t, "0001 00")); return err },
		"stats pair too long":  func() error { _, err := wire.ParseStats(unhex(t, "0001 0002 61 62")); return err },
		"dump short":           func() error { _, err := wire.ParseDumpEntry(unhex(t, "00000002 00000005 00")); return err },
		"dump name length":     func() error { _, err := wire.ParseDumpEntry(unhex(t, "00000002 00000005 0003 6162")); return err },
		"uint32 short":         func() error { _, err := wire.ParseUint32(unhex(t, "000001")); return err },
	} {
		if err := bad(); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: error %v, want ErrMalformed", name, err)
		}
	}
}

func TestOpcodes(t *testing.T) {
	var names []string
	for _, op := range wire.Opcodes() {
		names = append(names, op.String())
	}
	if got := strings.Join(names, " "); got != "noop get acquire release stats dump hit total add list visit leave active whit wcount uadd ucount" {
		t.Fatalf("Opcodes = %s", got)
	}
	if wire.Opcode(0x7f).Known() || wire.Opcode(0x7f).String() != "0x7f" {
		t.Fatal("0x7f is not an opcode")
	}
	for op, want := range map[wire.Opcode]uint32{
		wire.OpNoop: 64, wire.OpGet: 65537 + 64, wire.OpAcquire: 65545 + 64, wire.OpRelease: 65541 + 64,
		wire.OpStats: 64, wire.OpDump: 64, wire.OpHit: 257 + 64, wire.OpTotal: 257 + 64, wire.OpAdd: 8 + 257 + 64,
		wire.OpVisit: 4 + 2*257 + 64, wire.OpLeave: 2*257 + 64, wire.OpActive: 4 + 257 + 64, 0x7f: wire.MaxUnknownBody,
		wire.OpWindowHit: 4 + 257 + 64, wire.OpWindowCount: 4 + 257 + 64, wire.OpUniqueAdd: 257 + 2 + 1000*257 + 64,
		wire.OpUniqueCount: 2 + 100*257 + 64, wire.OpList: 2 + 2*257 + 64,
	} {
		if got := op.MaxRequestBody(); got != want {
			t.Errorf("%s.MaxRequestBody = %d, want %d", op, got, want)
		}
	}
	if wire.Status(0x99).Message() != "status 0x99" {
		t.Fatal(wire.Status(0x99).Message())
	}
}

func TestStatusError(t *testing.T) {
	var err error = &wire.StatusError{Opcode: wire.OpGet, Status: wire.StatusNotFound, Message: "Not found"}
	if !errors.Is(err, wire.StatusNotFound) || errors.Is(err, wire.StatusNotAcquired) {
		t.Fatal("errors.Is does not match the status")
	}
	if got := err.Error(); got != "counters: get: Not found (status 0x01)" {
		t.Fatal(got)
	}
}

func TestCheckName(t *testing.T) {
	if wire.CheckName("") == nil || wire.CheckName(strings.Repeat("x", wire.MaxNameLen+1)) == nil {
		t.Fatal("CheckName accepted a bad name")
	}
	if err := wire.CheckName(strings.Repeat("x", wire.MaxNameLen)); err != nil {
		t.Fatal(err)
	}
}

// readAll reads frames until an error and returns them (bodies copied).
func readAll(r *wire.Reader) ([]wire.Frame, error) {
	var fs []wire.Frame
	for {
		f, err := r.Read()
		if err != nil {
			return fs, err
		}
		f.Body = bytes.Clone(f.Body)
		fs = append(fs, f)
	}
}

func TestReaderPipelinedAndSplit(t *testing.T) {
	var stream []byte
	for i := range 200 {
		stream = wire.AppendAcquire(stream, uint32(i), "name", 1, 10)
	}
	long := strings.Repeat("L", wire.MaxNameLen) // bigger than the read buffer
	stream = wire.AppendRelease(stream, 200, long, 0)
	for name, src := range map[string]io.Reader{
		"one write":          bytes.NewReader(stream),
		"one byte at a time": iotest.OneByteReader(bytes.NewReader(stream)),
		"half reads":         iotest.HalfReader(bytes.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			fs, err := readAll(wire.NewRequestReader(src))
			if err != io.EOF {
				t.Fatalf("ended with %v, want io.EOF", err)
			}
			if len(fs) != 201 {
				t.Fatalf("%d frames, want 201", len(fs))
			}
			for i, f := range fs[:200] {
				req, err := wire.ParseAcquire(f.Body)
				if err != nil || f.Opaque != uint32(i) || string(req.Name) != "name" {
					t.Fatalf("frame %d: %+v %v", i, f, err)
				}
			}
			req, err := wire.ParseRelease(fs[200].Body)
			if err != nil || string(req.Name) != long {
				t.Fatalf("long release: %v", err)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		resp   bool
		want   error
	}{
		{"empty stream", "", false, io.EOF},
		{"partial header", "90 00 00", false, io.ErrUnexpectedEOF},
		{"partial body", "90 01 00 00 00000004 00000001 0002", false, io.ErrUnexpectedEOF},
		{"bad magic", "91 00 00 00 00000000 00000001", false, wire.ErrBadMagic},
		{"response magic on request reader", "90 00 00 00 00000000 00000001", true, wire.ErrBadMagic},
		// Only the header is present: the limit is checked before the
		// body is read, so this is not io.ErrUnexpectedEOF.
		{"noop body over allowance", "90 00 00 00 00000041 00000001", false, wire.ErrBodyTooLong},
		{"get body over limit", "90 01 00 00 00010042 00000001", false, wire.ErrBodyTooLong},
		{"unknown opcode body over limit", "90 7f 00 00 ffffffff 00000001", false, wire.ErrBodyTooLong},
		{"response over limit", "91 00 00 00 00100001 00000001", true, wire.ErrBodyTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := bytes.NewReader(unhex(t, tc.stream))
			r := wire.NewRequestReader(src)
			if tc.resp {
				r = wire.NewResponseReader(src)
			}
			_, err := r.Read()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var pe *wire.ProtocolError
			if errors.As(err, &pe) && pe.Header.Opaque != 1 {
				t.Fatalf("protocol error lost the header: %+v", pe.Header)
			}
		})
	}
}

func TestReaderAcceptsLimits(t *testing.T) {
	// A noop with a body of exactly the allowance and an unknown opcode
	// with the largest accepted body are read, not refused. The unknown
	// opcode's body is skipped, not returned: only its length is.
	stream := append(unhex(t, "90 00 00 00 00000040 00000001"), make([]byte, 64)...)
	stream = wire.AppendHeader(stream, wire.Header{Magic: wire.MagicRequest, Opcode: 0x7f, BodyLen: wire.MaxUnknownBody, Opaque: 2})
	stream = append(stream, make([]byte, wire.MaxUnknownBody)...)
	fs, err := readAll(wire.NewRequestReader(bytes.NewReader(stream)))
	if err != io.EOF || len(fs) != 2 || fs[1].BodyLen != wire.MaxUnknownBody || fs[1].Body != nil {
		t.Fatalf("%d frames, %v", len(fs), err)
	}
}

// TestReaderSkipsUnknownBodies: a request reader discards the body of an
// unknown opcode without buffering it, whatever its size and however the
// stream is split, and reads the next frame right after it; a response
// reader returns it.
func TestReaderSkipsUnknownBodies(t *testing.T) {
	body := bytes.Repeat([]byte{0x90}, 100_000) // looks like headers: must not be parsed as frames
	var stream []byte
	stream = wire.AppendHeader(stream, wire.Header{Magic: wire.MagicRequest, Opcode: 0x99, BodyLen: uint32(len(body)), Opaque: 1})
	stream = append(stream, body...)
	stream = wire.AppendHeader(stream, wire.Header{Magic: wire.MagicRequest, Opcode: 0x7f, BodyLen: 3, Opaque: 2})
	stream = append(stream, 1, 2, 3)
	stream = wire.AppendGet(stream, 3, "name")
	for name, src := range map[string]func() io.Reader{
		"one write":          func() io.Reader { return bytes.NewReader(stream) },
		"one byte at a time": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
	} {
		t.Run(name, func(t *testing.T) {
			r := wire.NewRequestReader(src())
			fs, err := readAll(r)
			if err != io.EOF || len(fs) != 3 {
				t.Fatalf("%d frames, %v", len(fs), err)
			}
			for i, want := range []uint32{uint32(len(body)), 3} {
				if f := fs[i]; f.Opaque != uint32(i+1) || f.BodyLen != want || f.Body != nil {
					t.Fatalf("frame %d: %+v, want opaque %d, body length %d and no body", i, f, i+1, want)
				}
			}
			if got, err := wire.ParseGet(fs[2].Body); err != nil || string(got) != "name" {
				t.Fatalf("get after the skipped bodies: %q, %v", got, err)
			}
			if c := wire.BufferCap(r); c != 0 {
				t.Fatalf("skipping allocated a %d-byte body buffer", c)
			}
		})
	}
	// Cut inside the skipped body: the stream ended inside a frame.
	if _, err := wire.NewRequestReader(bytes.NewReader(stream[:1000])).Read(); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut inside a skipped body: %v, want io.ErrUnexpectedEOF", err)
	}
	r := wire.NewResponseReader(bytes.NewReader(wire.AppendResponse(nil, 0x99, wire.StatusOK, 1, []byte("abc"))))
	if f, err := r.Read(); err != nil || string(f.Body) != "abc" {
		t.Fatalf("response of an unknown opcode: %+v, %v", f, err)
	}
}

// TestReaderReleasesLargeBuffers: a body over MaxRetainedBody is read into
// a buffer that the next Read drops before it waits for more input, so an
// idle connection after one large request keeps at most MaxRetainedBody;
// smaller buffers are kept and reused.
func TestReaderReleasesLargeBuffers(t *testing.T) {
	small := strings.Repeat("s", wire.MaxRetainedBody-4-4-2) // an Acquire body of exactly MaxRetainedBody
	large := strings.Repeat("L", wire.MaxNameLen)
	reqs := [][]byte{
		wire.AppendAcquire(nil, 0, small, 1, 1),
		wire.AppendAcquire(nil, 1, small[:5000], 1, 1),
		wire.AppendAcquire(nil, 2, large, 1, 1),
		wire.AppendRelease(nil, 3, large, 1),
		wire.AppendNoop(nil, 4),
		wire.AppendAcquire(nil, 5, small[:6000], 1, 1),
	}
	// caps[i] is the buffer the Reader holds when it first asks for the
	// bytes of request i: what an idle stream keeps after request i-1.
	caps := make([]int, len(reqs))
	var r *wire.Reader
	src := &chunkReader{chunks: reqs, onChunk: func(i int) { caps[i] = wire.BufferCap(r) }}
	r = wire.NewRequestReader(src)
	for i, req := range reqs {
		f, err := r.Read()
		if err != nil || f.Opaque != uint32(i) || !bytes.Equal(f.Body, req[wire.HeaderSize:]) {
			t.Fatalf("request %d: %+v, %v", i, f.Header, err)
		}
	}
	want := []int{0, len(small) + 10, len(small) + 10, 0, 0, 0}
	if !slices.Equal(caps, want) {
		t.Fatalf("buffer held before each request %v, want %v", caps, want)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if c := wire.BufferCap(r); c != 6000+10 {
		t.Fatalf("buffer of %d bytes after a small body, want it kept (%d)", c, 6000+10)
	}
}

// chunkReader returns its chunks in order, never two in one Read, and
// calls onChunk as it starts to return each.
type chunkReader struct {
	chunks  [][]byte
	i, off  int
	onChunk func(i int)
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.i == len(c.chunks) {
		return 0, io.EOF
	}
	if c.off == 0 {
		c.onChunk(c.i)
	}
	n := copy(p, c.chunks[c.i][c.off:])
	if c.off += n; c.off == len(c.chunks[c.i]) {
		c.i, c.off = c.i+1, 0
	}
	return n, nil
}

func ExampleAppendAcquire() {
	req := wire.AppendAcquire(nil, 1, "jobs", 1, 10)
	fmt.Printf("% x\n", req)
	// Output: 90 02 00 00 00 00 00 0e 00 00 00 01 00 00 00 01 00 00 00 0a 00 04 6a 6f 62 73
}
