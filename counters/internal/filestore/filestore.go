// Package filestore holds the file-system primitives shared by the access
// and participant file stores: an exclusive lock that holds across OS
// processes (Acquire), atomic file replacement (WriteFile) and an
// injective mapping from arbitrary counter names to file names (PathName).
//
// The lock is advisory: it protects against other users of this package
// (in this process or another), not against programs that write the same
// files without taking it.
package filestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxPathName is the longest file name PathName returns. It leaves room
// under the usual 255-byte file-name limit for the prefixes and suffixes
// the stores add (a leading dot, ".lock", ".tmp" plus a random number).
const MaxPathName = 200

// DefaultPerm is the mode of a file WriteFile creates. A file that already
// exists keeps its mode.
const DefaultPerm fs.FileMode = 0o644

// A Lock is an exclusive advisory lock (flock) on a lock file, held until
// Release.
type Lock struct {
	f *os.File
}

// Acquire opens the lock file at path, creating it if needed, and blocks
// until it holds an exclusive lock on it. The lock conflicts with every
// other Acquire of the same path, in this process or another; callers
// should still serialise their own goroutines first (with a mutex), so
// that waiting goroutines do not each block an OS thread in the kernel.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, DefaultPerm)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock and closes the lock file.
func (l *Lock) Release() error {
	// Closing the only descriptor of the open file releases the flock.
	return l.f.Close()
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
