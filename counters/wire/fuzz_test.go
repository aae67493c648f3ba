package wire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// fuzzSeeds are streams of valid, invalid and truncated frames.
func fuzzSeeds() [][]byte {
	var all []byte
	all = wire.AppendNoop(all, 1)
	all = wire.AppendGet(all, 2, "a")
	all = wire.AppendAcquire(all, 3, "jobs", 1, 10)
	all = wire.AppendRelease(all, 4, "jobs", 0)
	all = wire.AppendStats(all, 5)
	all = wire.AppendDump(all, 6)
	all = wire.AppendHit(all, 7, "vk.messages")
	all = wire.AppendTotal(all, 8, "vk.messages")
	all = wire.AppendVisit(all, 9, 300, "vk.users", "42")
	all = wire.AppendLeave(all, 10, "vk.users", "42")
	all = wire.AppendActive(all, 11, 0, "vk.users")
	all = wire.AppendWindowHit(all, 12, 3600, "api")
	all = wire.AppendWindowCount(all, 13, 60, "api")
	all = wire.AppendUniqueAdd(all, 14, "u", []string{"a", "bc"})
	all = wire.AppendUniqueCount(all, 15, []string{"u", "v"})
	all = wire.AppendList(all, 16, "page_", "page_1", 10)
	var resp []byte
	resp = wire.AppendUint32(resp, wire.OpGet, 1, 7)
	resp = wire.AppendStatsResponse(resp, 2, []wire.Stat{{Name: "objects", Value: "1"}})
	resp = wire.AppendDumpEntry(resp, 3, wire.DumpEntry{Name: "x", Consumption: 1, MaxConsumption: 2})
	resp = wire.AppendDumpEnd(resp, 3)
	resp = wire.AppendError(resp, wire.OpAcquire, wire.StatusNotAvailable, 4)
	resp = wire.AppendUint64(resp, wire.OpHit, 5, 926)
	resp = wire.AppendUint32Flag(resp, wire.OpVisit, 6, 3, true)
	resp = wire.AppendError(resp, wire.OpTotal, wire.StatusStoreFailure, 7)
	resp = wire.AppendFlag(resp, wire.OpUniqueAdd, 8, true)
	resp = wire.AppendUint64(resp, wire.OpWindowHit, 9, 41)
	return [][]byte{
		all, resp, all[:len(all)-3],
		wire.AppendAcquire(nil, 1, "", 0, 0),
		wire.AppendGet(nil, 1, "\x00"),
		wire.AppendVisit(nil, 1, 0, "n", ""),
		wire.AppendLeave(nil, 1, "", "k"),
		{0x90, 0x01, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1},
		{0x42},
	}
}

// FuzzReader frames arbitrary bytes as requests and as responses and
// decodes every body: nothing may panic, no body may exceed its limit, and
// whatever decodes must encode back to the same bytes.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := wire.NewRequestReader(bytes.NewReader(data))
		for {
			fr, err := r.Read()
			if err != nil {
				checkEnd(t, err)
				break
			}
			// A request reader skips the bodies of unknown opcodes.
			wantLen := fr.BodyLen
			if !fr.Opcode.Known() {
				wantLen = 0
			}
			if uint32(len(fr.Body)) != wantLen || fr.BodyLen > fr.Opcode.MaxRequestBody() {
				t.Fatalf("body of %d bytes for header %+v", len(fr.Body), fr.Header)
			}
			checkRequest(t, fr)
		}
		r = wire.NewResponseReader(bytes.NewReader(data))
		for {
			fr, err := r.Read()
			if err != nil {
				checkEnd(t, err)
				break
			}
			checkResponse(t, fr)
		}
	})
}

func checkEnd(t *testing.T, err error) {
	t.Helper()
	var pe *wire.ProtocolError
	if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &pe) {
		t.Fatalf("unexpected error %v", err)
	}
}

// checkRequest decodes a request body and re-encodes it.
func checkRequest(t *testing.T, fr wire.Frame) {
	var again []byte
	var err error
	switch fr.Opcode {
	case wire.OpGet:
		var name []byte
		if name, err = wire.ParseGet(fr.Body); err == nil {
			again = wire.AppendGet(nil, fr.Opaque, string(name))
		}
	case wire.OpAcquire:
		var req wire.AcquireRequest
		if req, err = wire.ParseAcquire(fr.Body); err == nil {
			if req.Resources == 0 || req.Maximum < req.Resources || len(req.Name) == 0 {
				t.Fatalf("invalid acquire accepted: %+v", req)
			}
			again = wire.AppendAcquire(nil, fr.Opaque, string(req.Name), req.Resources, req.Maximum)
		}
	case wire.OpRelease:
		var req wire.ReleaseRequest
		if req, err = wire.ParseRelease(fr.Body); err == nil {
			again = wire.AppendRelease(nil, fr.Opaque, string(req.Name), req.Resources)
		}
	case wire.OpHit:
		var name []byte
		if name, err = wire.ParseHit(fr.Body); err == nil {
			again = wire.AppendHit(nil, fr.Opaque, string(name))
		}
	case wire.OpTotal:
		var name []byte
		if name, err = wire.ParseTotal(fr.Body); err == nil {
			again = wire.AppendTotal(nil, fr.Opaque, string(name))
		}
	case wire.OpVisit:
		var req wire.VisitRequest
		if req, err = wire.ParseVisit(fr.Body); err == nil {
			if len(req.Name) == 0 || len(req.Key) == 0 {
				t.Fatalf("invalid visit accepted: %+v", req)
			}
			again = wire.AppendVisit(nil, fr.Opaque, req.Timeout, string(req.Name), string(req.Key))
		}
	case wire.OpLeave:
		var req wire.LeaveRequest
		if req, err = wire.ParseLeave(fr.Body); err == nil {
			if len(req.Name) == 0 || len(req.Key) == 0 {
				t.Fatalf("invalid leave accepted: %+v", req)
			}
			again = wire.AppendLeave(nil, fr.Opaque, string(req.Name), string(req.Key))
		}
	case wire.OpActive:
		var req wire.ActiveRequest
		if req, err = wire.ParseActive(fr.Body); err == nil {
			again = wire.AppendActive(nil, fr.Opaque, req.Timeout, string(req.Name))
		}
	case wire.OpWindowHit, wire.OpWindowCount:
		var req wire.WindowRequest
		if req, err = wire.ParseWindow(fr.Body); err == nil {
			if fr.Opcode == wire.OpWindowHit {
				again = wire.AppendWindowHit(nil, fr.Opaque, req.Window, string(req.Name))
			} else {
				again = wire.AppendWindowCount(nil, fr.Opaque, req.Window, string(req.Name))
			}
		}
	case wire.OpUniqueAdd:
		var req wire.UniqueAddRequest
		if req, err = wire.ParseUniqueAdd(fr.Body); err == nil {
			keys := make([]string, len(req.Keys))
			for i, k := range req.Keys {
				if len(k) == 0 || len(k) > wire.MaxUniqueFieldLen {
					t.Fatalf("invalid key accepted: %q", k)
				}
				keys[i] = string(k)
			}
			again = wire.AppendUniqueAdd(nil, fr.Opaque, string(req.Name), keys)
		}
	case wire.OpList:
		var req wire.ListRequest
		if req, err = wire.ParseList(fr.Body); err == nil {
			again = wire.AppendList(nil, fr.Opaque, string(req.Prefix), string(req.After), req.Limit)
		}
	case wire.OpUniqueCount:
		var names [][]byte
		if names, err = wire.ParseUniqueCount(fr.Body); err == nil {
			ns := make([]string, len(names))
			for i, n := range names {
				ns[i] = string(n)
			}
			again = wire.AppendUniqueCount(nil, fr.Opaque, ns)
		}
	default:
		return
	}
	if err != nil {
		if !errors.Is(err, wire.ErrInvalid) {
			t.Fatalf("parse error %v does not wrap ErrInvalid", err)
		}
		return
	}
	h := wire.ParseHeader(again)
	if h.Opcode != fr.Opcode || h.Opaque != fr.Opaque || !bytes.HasPrefix(fr.Body, again[wire.HeaderSize:]) {
		t.Fatalf("request %+v % x re-encodes as % x", fr.Header, fr.Body, again)
	}
}

// checkResponse decodes a response body and re-encodes it.
func checkResponse(t *testing.T, fr wire.Frame) {
	var again []byte
	switch {
	case fr.Status != wire.StatusOK:
		return
	case fr.Opcode == wire.OpStats:
		stats, err := wire.ParseStats(fr.Body)
		if err != nil {
			return
		}
		again = wire.AppendStatsResponse(nil, fr.Opaque, stats)
	case fr.Opcode == wire.OpHit || fr.Opcode == wire.OpTotal:
		v, err := wire.ParseUint64(fr.Body)
		if err != nil {
			return
		}
		again = wire.AppendUint64(nil, fr.Opcode, fr.Opaque, v)
	case fr.Opcode == wire.OpVisit || fr.Opcode == wire.OpLeave:
		v, flag, err := wire.ParseUint32Flag(fr.Body)
		if err != nil {
			return
		}
		again = wire.AppendUint32Flag(nil, fr.Opcode, fr.Opaque, v, flag)
	case fr.Opcode == wire.OpDump && len(fr.Body) > 0:
		e, err := wire.ParseDumpEntry(fr.Body)
		if err != nil {
			return
		}
		again = wire.AppendDumpEntry(nil, fr.Opaque, e)
	default:
		return
	}
	if !bytes.Equal(again[wire.HeaderSize:], fr.Body) {
		t.Fatalf("response body % x re-encodes as % x", fr.Body, again[wire.HeaderSize:])
	}
}
