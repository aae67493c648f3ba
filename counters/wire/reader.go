package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrBadMagic is wrapped by the *ProtocolError for a frame whose first byte
// is not the expected magic.
var ErrBadMagic = errors.New("bad magic")

// ErrBodyTooLong is wrapped by the *ProtocolError for a frame whose declared
// body length exceeds the limit for its opcode.
var ErrBodyTooLong = errors.New("body length over the limit")

// A ProtocolError is a frame that breaks the protocol: the stream can no
// longer be trusted, and the connection must be closed. It is different
// from a request that fails, which gets a status reply.
type ProtocolError struct {
	// Header is the offending header, so a server can answer it.
	Header Header
	// Err is ErrBadMagic or ErrBodyTooLong.
	Err error
}

// Error describes the frame, quoting its header bytes.
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("counters: %v (opcode %s, body length %d) in header % x",
		e.Err, e.Header.Opcode, e.Header.BodyLen, AppendHeader(nil, e.Header))
}

// Unwrap returns e.Err.
func (e *ProtocolError) Unwrap() error { return e.Err }

// A Frame is one header and its body.
type Frame struct {
	Header
	// Body is valid only until the next call to Read. It is nil for a
	// request whose opcode the codec does not know: a request Reader
	// skips such bodies (BodyLen still says how long it was).
	Body []byte
}

// A Reader splits a stream into frames. It checks the magic and the body
// limit from the header alone, before reading or allocating for the body, so
// its memory stays bounded by the largest allowed body while a frame is
// read, and by DefaultBufferSize plus MaxRetainedBody between frames. It is
// not safe for concurrent use.
type Reader struct {
	br      *bufio.Reader
	magic   byte
	maxBody func(Opcode) uint32
	// skipUnknown discards the bodies of unknown opcodes unread.
	skipUnknown bool
	// buf holds bodies that do not fit in br's buffer. One larger than
	// MaxRetainedBody is dropped at the next Read.
	buf []byte
}

// DefaultBufferSize is the read buffer size of a Reader. Bodies up to this
// size are returned without copying.
const DefaultBufferSize = 4096

// NewRequestReader returns a Reader of requests from r, for a server: the
// magic must be MagicRequest and each body at most Opcode.MaxRequestBody.
// The body of an opcode the codec does not know (at most MaxUnknownBody)
// is skipped without being buffered, since it can only be answered with
// StatusUnknownCommand: its Frame has a nil Body.
func NewRequestReader(r io.Reader) *Reader {
	return &Reader{
		br:          bufio.NewReaderSize(r, DefaultBufferSize),
		magic:       MagicRequest,
		maxBody:     Opcode.MaxRequestBody,
		skipUnknown: true,
	}
}

// NewResponseReader returns a Reader of responses from r, for a client: the
// magic must be MagicResponse and each body at most MaxResponseBody.
func NewResponseReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, DefaultBufferSize), magic: MagicResponse, maxBody: maxResponseBody}
}

func maxResponseBody(Opcode) uint32 { return MaxResponseBody }

// Buffered returns the number of bytes read from the stream but not yet
// returned as frames.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// Next returns the header of the next frame when that whole frame is
// already buffered and valid (the right magic, a body within its limit
// and within the buffer), so that Read will return it without blocking;
// else false.
func (r *Reader) Next() (Header, bool) {
	if r.br.Buffered() < HeaderSize {
		return Header{}, false
	}
	hb, err := r.br.Peek(HeaderSize)
	if err != nil {
		return Header{}, false
	}
	h := ParseHeader(hb)
	n := HeaderSize + int(h.BodyLen)
	if h.Magic != r.magic || h.BodyLen > r.maxBody(h.Opcode) || n > r.br.Size() || r.br.Buffered() < n {
		return Header{}, false
	}
	return h, true
}

// Read returns the next frame. At a clean end of stream between frames it
// returns io.EOF; a stream ending inside a frame gives io.ErrUnexpectedEOF.
// A bad magic or an over-long body gives a *ProtocolError, after which the
// Reader must not be used.
func (r *Reader) Read() (Frame, error) {
	if cap(r.buf) > MaxRetainedBody {
		// The previous body, valid until this call, was large: let it go
		// rather than pin it while the stream idles.
		r.buf = nil
	}
	hb, err := r.br.Peek(HeaderSize)
	if err != nil {
		if len(hb) > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	h := ParseHeader(hb)
	if _, err := r.br.Discard(HeaderSize); err != nil {
		return Frame{}, err
	}
	if h.Magic != r.magic {
		return Frame{}, &ProtocolError{Header: h, Err: ErrBadMagic}
	}
	if h.BodyLen > r.maxBody(h.Opcode) {
		return Frame{}, &ProtocolError{Header: h, Err: ErrBodyTooLong}
	}
	if r.skipUnknown && !h.Opcode.Known() {
		// Discard reads through br's own buffer: nothing is allocated.
		if _, err := r.br.Discard(int(h.BodyLen)); err != nil {
			return Frame{}, unexpected(err)
		}
		return Frame{Header: h}, nil
	}
	body, err := r.readBody(int(h.BodyLen))
	if err != nil {
		return Frame{}, err
	}
	return Frame{Header: h, Body: body}, nil
}

// readBody reads n bytes: in place when they fit the read buffer, else into
// r.buf, which is bounded by the body limit (and dropped by the next Read
// when over MaxRetainedBody).
func (r *Reader) readBody(n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n <= r.br.Size() {
		b, err := r.br.Peek(n)
		if err != nil {
			return nil, unexpected(err)
		}
		_, err = r.br.Discard(n)
		return b, err
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.br, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

// unexpected turns an end of stream inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
