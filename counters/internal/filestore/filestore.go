// Package filestore holds the file-system primitives shared by the access
// and participant file stores: an exclusive lock that holds across OS
// processes (Locker), atomic file replacement (WriteFile) and an
// injective mapping from arbitrary counter names to file names (PathName).
//
// The lock is advisory: it protects against other users of this package
// (in this process or another), not against programs that write the same
// files without taking it. A Locker takes it within a context, so that a
// lock file another process holds for too long fails the call at its
// deadline instead of blocking it.
package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MaxPathName is the longest file name PathName returns. It leaves room
// under the usual 255-byte file-name limit for the prefixes and suffixes
// the stores add (a leading dot, ".lock", ".tmp" plus a random number).
const MaxPathName = 200

// DefaultPerm is the mode of a file WriteFile creates. A file that already
// exists keeps its mode.
const DefaultPerm fs.FileMode = 0o644

// A Lock is an exclusive advisory lock (flock) on a lock file, held until
// Release; Locker.Lock takes it.
type Lock struct {
	f *os.File
	// unlock lets the next goroutine of this process have the lock file
	// (see Locker); nil once released.
	unlock func()
}

// Release drops the lock and closes the lock file.
func (l *Lock) Release() error {
	// Closing the only descriptor of the open file releases the flock.
	err := l.f.Close()
	if unlock := l.unlock; unlock != nil {
		l.unlock = nil // a second Release must not let a second goroutine in
		unlock()
	}
	return err
}

// Lock polling bounds: a Locker retries a lock file held by another
// process after minPoll, doubling up to maxPoll.
const (
	minPoll = time.Millisecond
	maxPoll = 10 * time.Millisecond
)

// A Locker takes the locks of lock files for one store, each within a
// context: a caller whose context ends while it waits for the lock gets
// the context's error instead of waiting on, however long another process
// holds the lock. Goroutines of this process wanting the same lock file
// queue on a semaphore of that path (so they neither poll nor block OS
// threads), and only the first of them tries the flock, without blocking,
// again and again until it gets it or its context ends. Different lock
// files never wait for each other.
//
// The zero Locker is ready to use. It is safe for concurrent use.
type Locker struct {
	mu sync.Mutex
	// paths holds the lock files some goroutine holds or waits for;
	// guarded by mu.
	paths map[string]*pathLock
}

// pathLock is the semaphore of one lock file among a Locker's goroutines.
type pathLock struct {
	// sem holds a token while a goroutine has the lock file (or tries
	// its flock).
	sem chan struct{}
	// refs counts the goroutines holding or waiting for sem; guarded by
	// Locker.mu. The entry is deleted when it drops to 0.
	refs int
}

// Lock opens the lock file at path, creating it if needed, and returns
// once it holds an exclusive lock on it, or returns an error wrapping
// ctx.Err() when ctx ends first. The lock conflicts with every other Lock
// of the same path, by this Locker or another, in this process or another.
func (l *Locker) Lock(ctx context.Context, path string) (*Lock, error) {
	pl := l.ref(path)
	unlock := func() {
		<-pl.sem
		l.unref(path, pl)
	}
	select {
	case pl.sem <- struct{}{}:
	case <-ctx.Done():
		l.unref(path, pl)
		return nil, fmt.Errorf("wait for %s: %w", path, ctx.Err())
	}
	if err := ctx.Err(); err != nil { // select picks at random when both are ready
		unlock()
		return nil, fmt.Errorf("wait for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, DefaultPerm)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for wait := minPoll; ; wait = min(2*wait, maxPoll) {
		ok, err := tryLockFile(f)
		if ok {
			return &Lock{f: f, unlock: unlock}, nil
		}
		if err == nil {
			err = pause(ctx, wait)
		}
		if err != nil {
			f.Close()
			unlock()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
}

// pause waits for d, or returns ctx.Err() when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ref returns path's semaphore, counting the caller in.
func (l *Locker) ref(path string) *pathLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paths == nil {
		l.paths = make(map[string]*pathLock)
	}
	pl := l.paths[path]
	if pl == nil {
		pl = &pathLock{sem: make(chan struct{}, 1)}
		l.paths[path] = pl
	}
	pl.refs++
	return pl
}

// unref counts the caller out of path's semaphore, dropping it when no
// goroutine holds or waits for it any more.
func (l *Locker) unref(path string, pl *pathLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pl.refs--; pl.refs == 0 {
		delete(l.paths, path)
	}
}

// WriteFile replaces the file at path with data so that a reader, or a
// crash at any point, sees either the old content or the new, never a mix:
// it writes a temporary file in the same directory, syncs it, renames it
// over path and syncs the directory. The temporary file is hidden (its
// name starts with a dot). An existing file's permission bits are kept;
// a new file gets DefaultPerm.
func WriteFile(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	perm := DefaultPerm
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// PathName maps a counter name (any non-empty byte string) to a file name,
// injectively, so distinct names never share a file:
//
//   - bytes a-z, 0-9, '_', '-' and '.' stay as they are, except a leading
//     '.', so the result is never ".", ".." or a hidden file;
//   - every other byte becomes %XX (upper-case hex), including upper-case
//     letters, so names differing only in case stay apart on
//     case-insensitive file systems;
//   - a result longer than MaxPathName is replaced by '~' followed by the
//     hex SHA-256 of the name ('~' itself is always escaped, so the two
//     forms cannot meet).
//
// PathName("vk.messages") is "vk.messages"; PathName("a/b") is "a%2Fb".
func PathName(name string) string {
	const hexDigits = "0123456789ABCDEF"
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if plain(c) && !(i == 0 && c == '.') {
			out = append(out, c)
		} else {
			out = append(out, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	if len(out) > MaxPathName {
		sum := sha256.Sum256([]byte(name))
		return "~" + hex.EncodeToString(sum[:])
	}
	return string(out)
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}
