package participant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vkcounter/vkcounter/counters/internal/filestore"
)

// File is a Store that keeps each name's set in a file of the BBS's
// bbs.cnt format: one line per key, "key,last_seen\n", last_seen in Unix
// seconds, for example
//
//	3789011499,1762615624
//	2500871836,1762615696
//
// The files for NewFile(path) are
//
//	path                        the name DefaultName (an existing bbs.cnt works as is)
//	path.d/<PathName(name)>     every other name
//
// where PathName is filestore.PathName (the name "vk.users" of
// storage/app/bbs.cnt lives in storage/app/bbs.cnt.d/vk.users). Next to
// each file is a hidden lock file ".<file>.lock".
//
// Every read-modify-write happens under the name's exclusive lock (a
// flock on its lock file across processes, behind a semaphore per name in
// this process: filestore.Locker), and files are replaced atomically (temporary file, fsync, rename), so nothing is
// lost when several processes share the files and a crash never leaves a
// torn file. A line that is not "key,seconds" or lacks its final newline
// (half-written) is skipped and the file rewritten without it; every
// other line is kept. Keys must not contain a comma or a line break.
// Writers that ignore the lock, such as the PHP BBS itself, can still
// lose their own updates while they share a file. Waiting for the lock
// ends with the call's context: a process that keeps a name's file locked
// fails that name's writes at their deadline (with the context's error)
// and holds up no other name.
//
// File is safe for concurrent use; the writes of one name are serialised.
type File struct {
	path  string
	clock func() time.Time

	// locks takes each name's lock, held across its file I/O on purpose:
	// that I/O is the critical section.
	locks filestore.Locker
	cap   *KeyCap // nil: no cap on keys per name
}

// SetMaxKeys caps the keys each name holds with c (nil: no cap). Call it
// before the store is used.
func (f *File) SetMaxKeys(c *KeyCap) { f.cap = c }

// NewFile returns a store whose DefaultName set is the file at path,
// reading the time from clock (time.Now when nil). It creates path's
// directory if needed; the files themselves are created on first write.
func NewFile(path string, clock func() time.Time) (*File, error) {
	if path == "" {
		return nil, errors.New("participant: empty path")
	}
	if clock == nil {
		clock = time.Now
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("participant: %s is a directory, want a file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("participant: %w", err)
	}
	return &File{path: path, clock: clock}, nil
}

// VisitMany records every key of keys as seen now under name, in one
// locked read-modify-write of the file; see Store. A key already in
// the file keeps its line, as the BBS does; new keys are appended in the
// order of keys.
func (f *File) VisitMany(ctx context.Context, name string, keys []string, timeout time.Duration) (int, int, error) {
	secs, err := checkVisitMany(name, keys, timeout, checkFileKey)
	if err != nil {
		return 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	var n, added int
	var refused error
	err = f.update(ctx, name, func(es []entry) ([]entry, bool) {
		now := f.clock().Unix()
		found := make(map[string]bool, len(keys)) // of keys: whether a line holds it
		for _, key := range keys {
			found[key] = false
		}
		if f.cap != nil {
			after := len(found) // every key visited, and the other keys active
			for _, e := range es {
				if _, visited := found[e.key]; !visited && active(e.seen, secs, now) {
					after++
				}
			}
			if f.cap.over(after) {
				refused = f.cap.refused(name, after)
				return es, false
			}
		}
		added = 0
		out := es[:0]
		for _, e := range es { // the file's keys are distinct: parseEntries merges repeats
			_, visited := found[e.key]
			switch {
			case visited:
				found[e.key] = true
				if !active(e.seen, secs, now) {
					added++
				}
				out = append(out, entry{key: e.key, seen: now})
			case active(e.seen, secs, now):
				out = append(out, e)
			}
		}
		for _, key := range keys {
			if !found[key] {
				found[key] = true
				added++
				out = append(out, entry{key: key, seen: now})
			}
		}
		n = len(out)
		return out, true
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return 0, 0, err
	}
	return n, added, nil
}

// Leave forgets key under name; see Store. A key that is not there
// leaves the file untouched.
func (f *File) Leave(ctx context.Context, name, key string) (int, bool, error) {
	if err := checkLeave(name, key); err != nil {
		return 0, false, err
	}
	if err := checkFileKey(key); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	removed := false
	var n int
	err := f.update(ctx, name, func(es []entry) ([]entry, bool) {
		out := es[:0]
		for _, e := range es {
			if e.key == key {
				removed = true
				continue
			}
			out = append(out, e)
		}
		n = len(out)
		return out, removed
	})
	if err != nil {
		return 0, false, err
	}
	return n, removed, nil
}

// Active returns the number of keys under name seen within timeout. It
// reads without locking (files are only ever replaced whole); if it finds
// damaged lines it rewrites the file clean under the lock.
func (f *File) Active(ctx context.Context, name string, timeout time.Duration) (int, error) {
	secs, err := checkActive(name, timeout)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	es, clean, err := readEntries(f.file(name))
	if err != nil {
		return 0, err
	}
	if !clean {
		err := f.update(ctx, name, func(got []entry) ([]entry, bool) {
			es = append([]entry(nil), got...)
			return got, false
		})
		if err != nil {
			return 0, err
		}
	}
	now := f.clock().Unix()
	n := 0
	for _, e := range es {
		if active(e.seen, secs, now) {
			n++
		}
	}
	return n, nil
}

// file returns the path of name's file.
func (f *File) file(name string) string {
	if name == DefaultName {
		return f.path
	}
	return filepath.Join(f.path+".d", filestore.PathName(name))
}

// update runs one locked read-modify-write of name's file: fn gets the
// file's entries and returns the new ones and whether they changed. The
// file is written when they changed or when it held damaged lines. Waiting
// for the lock ends with ctx.
func (f *File) update(ctx context.Context, name string, fn func([]entry) ([]entry, bool)) error {
	path := f.file(name)
	dir, base := filepath.Split(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("participant: %w", err)
	}
	lock, err := f.locks.Lock(ctx, filepath.Join(dir, "."+base+".lock"))
	if err != nil {
		return fmt.Errorf("participant: %w", err)
	}
	defer lock.Release()
	es, clean, err := readEntries(path)
	if err != nil {
		return err
	}
	es, changed := fn(es)
	if !changed && clean {
		return nil
	}
	if err := filestore.WriteFile(path, formatEntries(es)); err != nil {
		return fmt.Errorf("participant: %w", err)
	}
	return nil
}

// readEntries reads a bbs.cnt file; a missing file is an empty set. clean
// is false when lines were skipped as damaged or duplicate.
func readEntries(path string) (es []entry, clean bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("participant: %w", err)
	}
	es, clean = parseEntries(data)
	return es, clean, nil
}

// parseEntries parses "key,seconds\n" lines, in order. A key seen twice
// keeps its latest time at its first line.
func parseEntries(data []byte) (es []entry, clean bool) {
	clean = true
	at := map[string]int{}
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if !complete {
			return es, false // half-written last line
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		e, ok := parseEntry(line)
		if !ok {
			clean = false
			continue
		}
		if i, dup := at[e.key]; dup {
			clean = false
			es[i].seen = max(es[i].seen, e.seen)
			continue
		}
		at[e.key] = len(es)
		es = append(es, e)
	}
	return es, clean
}

func parseEntry(line []byte) (entry, bool) {
	key, secs, ok := bytes.Cut(line, []byte(","))
	if !ok || len(key) == 0 || len(key) > MaxKeyLen || len(secs) == 0 || len(secs) > 19 {
		return entry{}, false
	}
	for _, c := range secs {
		if c < '0' || c > '9' {
			return entry{}, false
		}
	}
	seen, err := strconv.ParseInt(string(secs), 10, 64)
	if err != nil {
		return entry{}, false
	}
	return entry{key: string(key), seen: seen}, true
}

func formatEntries(es []entry) []byte {
	var b []byte
	for _, e := range es {
		b = append(b, e.key...)
		b = append(b, ',')
		b = strconv.AppendInt(b, e.seen, 10)
		b = append(b, '\n')
	}
	return b
}

// checkFileKey refuses keys the line format cannot hold.
func checkFileKey(key string) error {
	if strings.ContainsAny(key, ",\r\n") {
		return fmt.Errorf("%w: %q holds a comma or a line break, which the file format cannot store", ErrInvalidKey, key)
	}
	return nil
}
