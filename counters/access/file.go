package access

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vkcounter/vkcounter/counters/internal/filestore"
	"github.com/vkcounter/vkcounter/counters/internal/names"
)

// Names of the files a File store adds next to the count files.
const (
	// namesDir is the subdirectory holding the counters other than DefaultName.
	namesDir = "names"
	// lockName is the lock file in each counter's directory.
	lockName = "count.lock"
)

// File is a Store that keeps each counter in N count files, the BBS's
// pseudo-transaction format: count0.dat … countN-1.dat, each holding a
// decimal integer. The total is the largest value; a Hit writes total+1
// into the file holding the smallest, and an Add of n writes total+n
// there, so the files stay in the BBS's format.
//
// Layout under dir:
//
//	dir/count0.dat … countN-1.dat         the counter DefaultName
//	dir/count.lock
//	dir/names/<PathName(name)>/count0.dat … countN-1.dat, count.lock
//	                                      every other counter
//
// where PathName is filestore.PathName (for example the counter
// "vk.messages" lives in dir/names/vk.messages/). An existing BBS
// directory storage/app/count/ therefore works as it is: NewFile on it
// with the BBS's COUNTLEVEL serves its total as DefaultName.
//
// Unlike the BBS, which loses increments when two requests pick the same
// file, every Hit and Add happens under the counter's exclusive lock (a
// flock on its count.lock across processes, behind a semaphore per counter
// in this process: filestore.Locker) and re-reads the files under it, so
// File loses nothing even when several processes share the directory.
// Waiting for the lock ends with the call's context: a process that keeps
// a counter locked fails that counter's Hits and Adds at their deadline
// (with the context's error) and holds up no other counter. Files are replaced atomically (temporary file, fsync,
// rename), so a crash never leaves a torn file. A missing, empty or
// unparsable count file contributes nothing to the total and is the first
// one rewritten; the total survives as long as one file is valid. Writers
// that ignore the lock, such as the PHP BBS itself, can still lose their
// own updates while they share the directory.
//
// File is safe for concurrent use; the Hits and Adds of one counter are
// serialised.
type File struct {
	dir    string
	levels int

	// locks takes each counter's lock, held across its file I/O on
	// purpose: that I/O is the critical section.
	locks filestore.Locker
}

// NewFile returns a store keeping its counters under dir, with levels
// count files per counter (0 means DefaultLevels). It creates dir if
// needed. It refuses a directory holding count files numbered levels or
// above, which would mean levels is lower than the COUNTLEVEL that wrote
// them and part of the total would be ignored.
func NewFile(dir string, levels int) (*File, error) {
	if levels == 0 {
		levels = DefaultLevels
	}
	if levels < 1 || levels > MaxLevels {
		return nil, fmt.Errorf("access: levels %d out of range 1..%d", levels, MaxLevels)
	}
	if dir == "" {
		return nil, errors.New("access: empty directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	for _, e := range entries {
		if i, ok := countIndex(e.Name()); ok && i >= levels {
			return nil, fmt.Errorf("access: %s holds %s but levels is %d: set levels to the number of count files", dir, e.Name(), levels)
		}
	}
	return &File{dir: dir, levels: levels}, nil
}

// countIndex returns i for a file named count<i>.dat.
func countIndex(file string) (int, bool) {
	digits, ok := strings.CutPrefix(file, "count")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".dat"); !ok || digits == "" {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == digits
}

// Add adds n (n >= 1) to the counter name and returns its new total: it
// writes total+n into the count file holding the smallest value.
func (f *File) Add(ctx context.Context, name string, n int64) (int64, error) {
	if err := checkAdd(name, n); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dir := f.counterDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("access: %w", err)
	}
	lock, err := f.locks.Lock(ctx, filepath.Join(dir, lockName))
	if err != nil {
		return 0, fmt.Errorf("access: %w", err)
	}
	defer lock.Release()

	s, err := f.read(dir)
	if err != nil {
		return 0, err
	}
	if s.damaged && !s.valid {
		return 0, fmt.Errorf("%w in %s", ErrCorrupt, dir)
	}
	next, err := addTotal(s.max, n)
	if err != nil {
		return 0, err
	}
	if err := filestore.WriteFile(f.countPath(dir, s.target), strconv.AppendInt(nil, next, 10)); err != nil {
		return 0, fmt.Errorf("access: %w", err)
	}
	return next, nil
}

// Total returns the counter's total, or ErrNotFound if it was never hit.
// It takes no lock: files are only ever replaced whole, so it reads a
// total at least as new as the last Hit or Add that returned before it
// started.
func (f *File) Total(ctx context.Context, name string) (int64, error) {
	if err := names.Check(name, ErrInvalidName); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dir := f.counterDir(name)
	s, err := f.read(dir)
	switch {
	case err != nil:
		return 0, err
	case s.valid:
		return s.max, nil
	case s.damaged:
		return 0, fmt.Errorf("%w in %s", ErrCorrupt, dir)
	}
	return 0, ErrNotFound
}

func (f *File) counterDir(name string) string {
	if name == DefaultName {
		return f.dir
	}
	return filepath.Join(f.dir, namesDir, filestore.PathName(name))
}

func (f *File) countPath(dir string, i int) string {
	return filepath.Join(dir, "count"+strconv.Itoa(i)+".dat")
}

// countState summarises a counter's files.
type countState struct {
	max     int64 // the largest valid value: the total (0 if none)
	valid   bool  // some file holds a valid value
	damaged bool  // some file is present but unparsable
	target  int   // the file the next Hit or Add writes
}

// read reads all count files of the counter in dir. The target is the
// first missing, empty or damaged file, else the first holding the
// smallest value.
func (f *File) read(dir string) (countState, error) {
	var s countState
	target, targetVal := 0, int64(math.MaxInt64)
	for i := 0; i < f.levels; i++ {
		data, err := os.ReadFile(f.countPath(dir, i))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s, fmt.Errorf("access: %w", err)
		}
		v, ok := parseCount(data)
		switch {
		case ok:
			s.valid = true
			s.max = max(s.max, v)
		case len(data) > 0:
			s.damaged = true
		}
		if !ok {
			v = -1 // a bad file is rewritten before any good one
		}
		if v < targetVal {
			target, targetVal = i, v
		}
	}
	s.target = target
	return s, nil
}

// parseCount parses a count file: a non-negative decimal integer, as the
// BBS writes it, optionally followed by a newline.
func parseCount(data []byte) (int64, bool) {
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	if len(data) == 0 {
		return 0, false
	}
	for _, c := range data {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(data), 10, 64)
	return v, err == nil
}
