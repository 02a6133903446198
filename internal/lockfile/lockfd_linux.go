//go:build linux

package lockfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFD takes an OFD write lock on the whole file. Unlike flock, OFD locks
// also work on NFS and conflict with classic POSIX locks (RocksDB's).
func lockFD(f *os.File) error {
	spec := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &spec)
}
