//go:build unix

package lockfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockOS takes an exclusive lock on the whole of name that is owned by the
// open file description (lockFD): no other descriptor, in this process or
// another, can take it, and only closing this one releases it.
func lockOS(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	if err := lockFD(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another process or handle: %v", ErrLocked, name, err)
		}
		return nil, fmt.Errorf("lockfile: locking %s: %w", name, err)
	}
	return f, nil
}

// devIno returns the device and inode of a file: what identifies a
// directory however its path is spelled.
func devIno(_ string, st os.FileInfo) (dev, ino uint64, ok bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(s.Dev), uint64(s.Ino), true
}
