package client

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/vkcounter/vkcounter/counters/wire"
)

// WindowHit records a hit on the window counter (name, window) and
// returns how many earlier hits are inside the window. The window is whole
// seconds from 1 s to wire.MaxWindow.
func (c *Client) WindowHit(ctx context.Context, name string, w time.Duration) (int64, error) {
	return c.windowCall(ctx, wire.OpWindowHit, name, w)
}

// WindowCount returns how many hits on the window counter (name, window)
// are inside the window.
func (c *Client) WindowCount(ctx context.Context, name string, w time.Duration) (int64, error) {
	return c.windowCall(ctx, wire.OpWindowCount, name, w)
}

func (c *Client) windowCall(ctx context.Context, op wire.Opcode, name string, w time.Duration) (int64, error) {
	secs, err := windowSeconds(name, w)
	if err != nil {
		return 0, fmt.Errorf("counters: %s: %w", op, err)
	}
	var v int64
	err = c.call(ctx, op,
		func(dst []byte, opaque uint32) []byte { return appendWindow(dst, op, opaque, secs, name) },
		func(body []byte) (err error) { v, err = parseTotal(body); return err })
	return v, err
}

func appendWindow(dst []byte, op wire.Opcode, opaque, secs uint32, name string) []byte {
	if op == wire.OpWindowHit {
		return wire.AppendWindowHit(dst, opaque, secs, name)
	}
	return wire.AppendWindowCount(dst, opaque, secs, name)
}

// windowSeconds checks a window counter's name and window and returns the
// window's 4-byte field.
func windowSeconds(name string, w time.Duration) (uint32, error) {
	if err := wire.CheckKindName(name); err != nil {
		return 0, err
	}
	if w < time.Second || w > wire.MaxWindow || w%time.Second != 0 {
		return 0, fmt.Errorf("%w: window %v, want whole seconds from 1s to %v", wire.ErrInvalid, w, wire.MaxWindow)
	}
	return uint32(w / time.Second), nil
}

// UniqueAdd adds 1 to wire.MaxUniqueKeys keys to the unique counter name
// and reports whether its estimate may have changed.
func (c *Client) UniqueAdd(ctx context.Context, name string, keys []string) (bool, error) {
	if err := checkUniqueFields(name, keys, wire.MaxUniqueKeys); err != nil {
		return false, fmt.Errorf("counters: uadd: %w", err)
	}
	var changed bool
	err := c.call(ctx, wire.OpUniqueAdd,
		func(dst []byte, opaque uint32) []byte { return wire.AppendUniqueAdd(dst, opaque, name, keys) },
		func(body []byte) (err error) { changed, err = wire.ParseFlag(body); return err })
	return changed, err
}

// UniqueCount returns the estimated number of distinct keys of the union
// of 1 to wire.MaxUnionNames unique counters; a *wire.StatusError with
// wire.StatusNotFound if none was ever added to.
func (c *Client) UniqueCount(ctx context.Context, names ...string) (int64, error) {
	if err := checkUniqueFields("", names, wire.MaxUnionNames); err != nil {
		return 0, fmt.Errorf("counters: ucount: %w", err)
	}
	var v int64
	err := c.call(ctx, wire.OpUniqueCount,
		func(dst []byte, opaque uint32) []byte { return wire.AppendUniqueCount(dst, opaque, names) },
		func(body []byte) (err error) { v, err = parseTotal(body); return err })
	return v, err
}

// checkUniqueFields checks a name (unless empty) and 1 to most fields,
// each 1 to wire.MaxUniqueFieldLen bytes.
func checkUniqueFields(name string, fields []string, most int) error {
	if len(fields) < 1 || len(fields) > most {
		return fmt.Errorf("%w: %d keys or names, want 1 to %d", wire.ErrInvalid, len(fields), most)
	}
	for _, f := range append([]string{name}, fields...) {
		if len(f) > wire.MaxUniqueFieldLen {
			return fmt.Errorf("%w: %d bytes, want at most %d", wire.ErrInvalid, len(f), wire.MaxUniqueFieldLen)
		}
	}
	for _, f := range fields {
		if f == "" {
			return fmt.Errorf("%w: empty key or name", wire.ErrInvalid)
		}
	}
	return nil
}

// WindowHit queues a WHit; window in seconds.
func (p *Pipeline) WindowHit(name string, window uint32) {
	p.buf = wire.AppendWindowHit(p.buf, p.queue(wire.OpWindowHit), window, name)
}

// WindowCount queues a WCount; window in seconds.
func (p *Pipeline) WindowCount(name string, window uint32) {
	p.buf = wire.AppendWindowCount(p.buf, p.queue(wire.OpWindowCount), window, name)
}

// UniqueAdd queues a UAdd.
func (p *Pipeline) UniqueAdd(name string, keys []string) {
	p.buf = wire.AppendUniqueAdd(p.buf, p.queue(wire.OpUniqueAdd), name, keys)
}

// UniqueCount queues a UCount.
func (p *Pipeline) UniqueCount(names []string) {
	p.buf = wire.AppendUniqueCount(p.buf, p.queue(wire.OpUniqueCount), names)
}

// WindowHit records a hit on the window counter on its owner.
func (rc *RingClient) WindowHit(ctx context.Context, name string, w time.Duration) (v int64, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.WindowHit(ctx, name, w); return err })
	return v, err
}

// WindowCount reads the window counter from its owner.
func (rc *RingClient) WindowCount(ctx context.Context, name string, w time.Duration) (v int64, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { v, err = c.WindowCount(ctx, name, w); return err })
	return v, err
}

// UniqueAdd adds keys to the unique counter on its owner.
func (rc *RingClient) UniqueAdd(ctx context.Context, name string, keys []string) (changed bool, err error) {
	err = rc.owned(ctx, name, func(c *Client) error { changed, err = c.UniqueAdd(ctx, name, keys); return err })
	return changed, err
}

// UniqueCount estimates the union of unique counters. All names must have
// the same owner on the ring (a union is computed by one server); names
// owned by different servers are an error wrapping wire.ErrInvalid, and
// nothing is sent.
func (rc *RingClient) UniqueCount(ctx context.Context, names ...string) (v int64, err error) {
	if len(names) == 0 {
		return 0, fmt.Errorf("counters: ucount: %w: no names", wire.ErrInvalid)
	}
	owner := rc.Owner(names[0])
	for _, n := range names[1:] {
		if o := rc.Owner(n); o != owner {
			return 0, fmt.Errorf("counters: ucount: %w: %q is on %s and %q on %s: a union needs one server", wire.ErrInvalid, names[0], owner, n, o)
		}
	}
	err = rc.owned(ctx, names[0], func(c *Client) error { v, err = c.UniqueCount(ctx, names...); return err })
	return v, err
}

// CheckWindow returns the error WindowHit and WindowCount give, before
// sending anything, for this name and window, or nil.
func CheckWindow(name string, w time.Duration) error {
	_, err := windowSeconds(name, w)
	return err
}

// CheckUniqueAdd returns the error UniqueAdd gives, before sending
// anything, for this name and keys, or nil.
func CheckUniqueAdd(name string, keys []string) error {
	if err := wire.CheckKindName(name); err != nil {
		return err
	}
	return checkUniqueFields(name, keys, wire.MaxUniqueKeys)
}

// CheckUniqueCount returns the error UniqueCount gives, before sending
// anything, for these names, or nil.
func CheckUniqueCount(names []string) error {
	return checkUniqueFields("", names, wire.MaxUnionNames)
}

// CheckList returns the error List gives, before sending anything, for
// these arguments, or nil.
func CheckList(prefix, after string, limit int) error {
	switch {
	case len(prefix) > wire.MaxListField:
		return fmt.Errorf("%w: prefix longer than %d bytes", wire.ErrInvalid, wire.MaxListField)
	case len(after) > wire.MaxListField:
		return fmt.Errorf("%w: after longer than %d bytes", wire.ErrInvalid, wire.MaxListField)
	case limit < 1 || limit > wire.MaxListLimit:
		return fmt.Errorf("%w: limit %d, want 1 to %d", wire.ErrInvalid, limit, wire.MaxListLimit)
	}
	return nil
}

// List returns one page of the access counters whose names start with
// prefix and sort after after (byte order): up to limit (1 to 1000)
// counters, and whether more follow. Ask for the next page with after set
// to the last name of this one.
func (c *Client) List(ctx context.Context, prefix, after string, limit int) ([]wire.ListEntry, bool, error) {
	if err := CheckList(prefix, after, limit); err != nil {
		return nil, false, fmt.Errorf("counters: list: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	opaque := c.nextOpaque()
	c.buf = wire.AppendList(c.buf[:0], opaque, prefix, after, uint16(limit))
	var entries []wire.ListEntry
	var more bool
	err := c.exchange(ctx, c.buf, func() error {
		for {
			f, err := c.readResponse(wire.OpList, opaque)
			if err != nil {
				return err
			}
			if len(f.Body) == 1 {
				more, err = wire.ParseFlag(f.Body)
				return err
			}
			name, total, err := wire.ParseListEntry(f.Body)
			if err != nil {
				return err
			}
			if total > math.MaxInt64 {
				return fmt.Errorf("%w: total %d beyond int64", wire.ErrMalformed, total)
			}
			entries = append(entries, wire.ListEntry{Name: name, Total: int64(total)})
		}
	})
	return entries, more, err
}
