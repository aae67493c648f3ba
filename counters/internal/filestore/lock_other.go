//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package filestore

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// lockFile fails on systems without flock: without a lock that holds
// across processes the file stores could lose updates, so they refuse to
// run rather than run unsafely.
func lockFile(*os.File) error {
	return fmt.Errorf("flock is not available on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func tryLockFile(f *os.File) (bool, error) { return false, lockFile(f) }
