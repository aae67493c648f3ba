//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package filestore

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// tryLockFile fails on systems without flock: without a lock that holds
// across processes the file stores could lose updates, so they refuse to
// run rather than run unsafely.
func tryLockFile(*os.File) (bool, error) {
	return false, fmt.Errorf("flock is not available on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
