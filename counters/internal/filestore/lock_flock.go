//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package filestore

import (
	"errors"
	"os"
	"syscall"
)

// tryLockFile takes the lock without blocking: false when another open
// file holds it.
func tryLockFile(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}
